// The compiled read's shard files: each mapped once per process, and a TFRecord file's records
// checked (framing and CRC32C) once per mapping before any of their bytes is handed out.
// Included by passes.cc.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "tensorflow/core/lib/hash/crc32c.h"
#include "tensorflow/core/platform/errors.h"
#include "tensorflow/core/platform/status.h"

constexpr int64_t kHeadBytes = 12, kFootBytes = 4;  // TFRecord: length + its CRC; data CRC

// A shard file mapped once for the process: a new mapping per iterator (Keras makes one an
// epoch) would fault every page in again. Kept while the file on disk is the one mapped.
struct Mapping {
  const char* data = nullptr;
  size_t size = 0;
  // A TFRecord file's records already checked (a byte each), made by the first dataset that
  // reads it as records: every later read of the process skips their CRC.
  mutable std::once_flag made;
  mutable std::unique_ptr<std::atomic<uint8_t>[]> checked;
  ~Mapping() {
    if (data != nullptr) munmap(const_cast<char*>(data), size);
  }
  void Records(int64_t count) const {
    std::call_once(made, [&] { checked.reset(new std::atomic<uint8_t>[count]()); });
  }
};

using FileId = std::tuple<dev_t, ino_t, off_t, int64_t>;  // device, inode, size, mtime (ns)

// The process's mappings by path, each with the file it mapped.
struct MappedFiles {
  std::mutex lock;
  std::map<std::string, std::pair<FileId, std::shared_ptr<const Mapping>>> maps;
};

inline MappedFiles& Mapped() {
  static MappedFiles* mapped = new MappedFiles();
  return *mapped;
}

// Forget the mappings of files deleted or replaced since (once a dataset: a stat a file).
inline void ForgetStaleMappings() {
  MappedFiles& m = Mapped();
  std::lock_guard<std::mutex> hold(m.lock);
  for (auto it = m.maps.begin(); it != m.maps.end();) {
    struct stat now;
    const FileId& was = it->second.first;
    const bool same = stat(it->first.c_str(), &now) == 0 && now.st_ino == std::get<1>(was) &&
                      now.st_size == std::get<2>(was);
    it = same ? std::next(it) : m.maps.erase(it);
  }
}

inline tensorflow::Status MapFile(const std::string& path, std::shared_ptr<const Mapping>* out) {
  namespace errors = tensorflow::errors;
  auto& lock = Mapped().lock;
  auto& maps = Mapped().maps;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errors::NotFound(path, ": cannot be opened (", std::strerror(errno), ")");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return errors::NotFound(path, ": cannot be read (", std::strerror(errno), ")");
  }
  const FileId id{st.st_dev, st.st_ino, st.st_size,
                  int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
  std::lock_guard<std::mutex> hold(lock);
  auto found = maps.find(path);
  if (found == maps.end() || found->second.first != id) {
    auto mapping = std::make_shared<Mapping>();
    if (st.st_size > 0) {
      void* data = mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
      if (data == MAP_FAILED) {
        close(fd);
        return errors::Internal(path, ": cannot be mapped (", std::strerror(errno), ")");
      }
      mapping->data = static_cast<const char*>(data);
      mapping->size = st.st_size;
    }
    maps[path] = {id, mapping};
    found = maps.find(path);
  }
  close(fd);
  *out = found->second.second;
  return tensorflow::OkStatus();
}

inline uint32_t MaskedCrc(const char* data, size_t size) {
  return tensorflow::crc32c::Mask(tensorflow::crc32c::Value(data, size));
}

inline uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;  // little-endian: x86-64 and aarch64 as TFRecord
}

// Record `i` of a TFRecord file whose records are `step` bytes apart, record 0's data at
// `first`: its framing (length, the length's CRC) and its data's CRC32C, checked once per
// mapping (Records sized it). An empty string when sound, else the one-line error.
inline std::string CheckRecord(const Mapping& m, const std::string& path, int64_t first,
                               int64_t step, int64_t i) {
  if (m.checked[i].load(std::memory_order_acquire)) return "";
  const char* data = m.data + first + i * step;
  const int64_t length = step - kHeadBytes - kFootBytes;
  uint64_t said;
  std::memcpy(&said, data - kHeadBytes, sizeof said);
  if (said != static_cast<uint64_t>(length) || MaskedCrc(data - kHeadBytes, 8) != Load32(data - 4)) {
    return path + ": record " + std::to_string(i) + ": damaged record header";
  }
  if (MaskedCrc(data, length) != Load32(data + length)) {
    return path + ": record " + std::to_string(i) + " is corrupted (data CRC mismatch)";
  }
  m.checked[i].store(1, std::memory_order_release);
  return "";
}
