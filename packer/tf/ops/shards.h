// The compiled read's shard files: each mapped once per process, and a TFRecord file's records
// found and checked (framing and CRC32C) once per mapping before any of their bytes is used.
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
#include <vector>

#include "tensorflow/core/lib/hash/crc32c.h"
#include "tensorflow/core/platform/errors.h"
#include "tensorflow/core/platform/status.h"

constexpr int64_t kHeadBytes = 12, kFootBytes = 4;  // TFRecord: length + its CRC; data CRC

// A shard file mapped once for the process: a new mapping per iterator (Keras makes one an
// epoch) would fault every page in again. Kept while the file on disk is the one mapped.
struct Mapping {
  const char* data = nullptr;
  size_t size = 0;
  // A TFRecord file's records (each one's data start and length), found by walking its framing
  // once per mapping (by the first dataset that reads it as records), each length's CRC
  // checked on the way; and which records' data CRC is checked already (a byte each).
  mutable std::once_flag made;
  mutable std::string framing;  // why the framing is unsound, or empty
  mutable std::vector<int64_t> starts, lengths;
  mutable std::unique_ptr<std::atomic<uint8_t>[]> checked;
  ~Mapping() {
    if (data != nullptr) munmap(const_cast<char*>(data), size);
  }
  // The records, found once: empty when the framing is sound, else the one-line error.
  const std::string& Records(const std::string& path) const;
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

inline uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline const std::string& Mapping::Records(const std::string& path) const {
  std::call_once(made, [&] {
    const int64_t size = static_cast<int64_t>(this->size);
    int64_t at = 0;
    while (at < size) {
      if (size - at < kHeadBytes) {
        framing = path + ": truncated record header at byte " + std::to_string(at);
        return;
      }
      const uint64_t length = Load64(data + at);
      if (MaskedCrc(data + at, 8) != Load32(data + at + 8)) {
        framing = path + ": corrupted record length at byte " + std::to_string(at);
        return;
      }
      if (size - at < kHeadBytes + kFootBytes ||
          length > static_cast<uint64_t>(size - at - kHeadBytes - kFootBytes)) {
        framing = path + ": truncated last record (at byte " + std::to_string(at) + " of " +
                  std::to_string(size) + ")";
        return;
      }
      starts.push_back(at + kHeadBytes);
      lengths.push_back(static_cast<int64_t>(length));
      at += kHeadBytes + static_cast<int64_t>(length) + kFootBytes;
    }
    starts.shrink_to_fit();  // 16 bytes a record kept, not the growth's up to 32
    lengths.shrink_to_fit();
    checked.reset(new std::atomic<uint8_t>[starts.size()]());
  });
  return framing;
}

// Record `i` of a TFRecord file (Records found them): whether its data's CRC32C holds,
// checked once per mapping.
inline bool CheckRecord(const Mapping& m, int64_t i) {
  if (m.checked[i].load(std::memory_order_acquire)) return true;
  const char* data = m.data + m.starts[i];
  if (MaskedCrc(data, m.lengths[i]) != Load32(data + m.lengths[i])) return false;
  m.checked[i].store(1, std::memory_order_release);
  return true;
}
