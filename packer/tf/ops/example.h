// The compiled read's view of a packer tf.train.Example: where each wanted feature's value
// lies in a record (found by walking the wire format, as tfrecord_wire.decode_lists does),
// and a class id's varint stored as the field's integer dtype with no quiet narrowing (as
// NumPy's asarray of the Python reader). Included by passes.cc.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tensorflow/core/framework/types.h"

// A feature's first value in a record: a BytesList's first bytes, an Int64List's packed
// varints (kind 1 or 3, as the Example's list tag >> 3); size -1 where the record has none.
struct Span {
  const uint8_t* begin = nullptr;
  int64_t size = -1;
  int kind = 0;
};

// The varint at `p` (before `end`), `p` moved past it; false if cut short or beyond 64 bits.
inline bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t byte = *p++;
    if (shift == 63 && byte > 1) return false;  // more than 64 bits
    v |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (byte < 0x80) {
      *value = v;
      return true;
    }
  }
  return false;
}

// The length-delimited field `tag` that must begin at `p`: [*begin, *stop) inside `end`.
inline bool Expect(const uint8_t* p, const uint8_t* end, uint64_t tag, const uint8_t** begin,
                   const uint8_t** stop) {
  uint64_t found, size;
  if (!ReadVarint(p, end, &found) || found != tag || !ReadVarint(p, end, &size) ||
      size > static_cast<uint64_t>(end - p)) {
    return false;
  }
  *begin = p;
  *stop = p + size;
  return true;
}

// Each of `keys`' feature in the Example held in data[0, length) (the last one of a key, as a
// dict of them): false when the record is not a packer Example.
inline bool FindFeatures(const char* data, int64_t length, const std::vector<std::string>& keys,
                         std::vector<Span>* spans) {
  spans->assign(keys.size(), Span());
  const uint8_t* const bytes = reinterpret_cast<const uint8_t*>(data);
  const uint8_t *pos, *end;
  if (!Expect(bytes, bytes + length, 0x0A, &pos, &end) || end != bytes + length) return false;
  while (pos < end) {  // Features.feature map entries: key (1), Feature (2)
    const uint8_t *entry, *entry_end, *key, *key_end, *feature, *feature_end, *list, *list_end;
    if (!Expect(pos, end, 0x0A, &entry, &entry_end) ||
        !Expect(entry, entry_end, 0x0A, &key, &key_end) ||
        !Expect(key_end, entry_end, 0x12, &feature, &feature_end) || feature_end != entry_end ||
        feature == feature_end) {
      return false;
    }
    const uint64_t kind = *feature;  // BytesList 0x0A, FloatList 0x12, Int64List 0x1A
    if ((kind != 0x0A && kind != 0x12 && kind != 0x1A) ||
        !Expect(feature, feature_end, kind, &list, &list_end)) {
      return false;
    }
    Span span{list, 0, static_cast<int>(kind >> 3)};
    if (list < list_end) {  // the first value (a packed list's values: one field)
      const uint8_t *value, *value_end;
      if (!Expect(list, list_end, 0x0A, &value, &value_end)) return false;
      span = {value, value_end - value, span.kind};
    }
    const size_t key_size = key_end - key;
    for (size_t k = 0; k < keys.size(); ++k) {
      if (keys[k].size() == key_size && std::memcmp(keys[k].data(), key, key_size) == 0) {
        (*spans)[k] = span;
      }
    }
    pos = entry_end;
  }
  return true;
}

template <typename T>
bool StoreAs(int64_t value, char* out) {
  using Limits = std::numeric_limits<T>;
  const bool fits = Limits::is_signed ? value >= static_cast<int64_t>(Limits::min()) &&
                                            value <= static_cast<int64_t>(Limits::max())
                                      : value >= 0 && static_cast<uint64_t>(value) <=
                                                          static_cast<uint64_t>(Limits::max());
  if (!fits) return false;
  const T stored = static_cast<T>(value);
  std::memcpy(out, &stored, sizeof stored);
  return true;
}

// An Int64List's one value (a class id's: one, as the Python reader takes it) as `dtype` at
// `out`: "" or why not (cut short, not one value, or a value the dtype cannot hold).
inline std::string StoreOneInt(const Span& span, tensorflow::DataType dtype, char* out) {
  if (span.size <= 0) return "no value";
  uint64_t first = 0, value;
  int64_t count = 0;
  for (const uint8_t *p = span.begin, *end = p + span.size; p < end; ++count) {
    if (!ReadVarint(p, end, &value)) return "a varint cut short or over 64 bits";
    if (count == 0) first = value;
  }
  if (count != 1) return std::to_string(count) + " values, one expected";
  const int64_t v = static_cast<int64_t>(first);  // two's complement, as int64_values
  bool fits = false;
  switch (dtype) {
    case tensorflow::DT_INT8: fits = StoreAs<int8_t>(v, out); break;
    case tensorflow::DT_UINT8: fits = StoreAs<uint8_t>(v, out); break;
    case tensorflow::DT_INT16: fits = StoreAs<int16_t>(v, out); break;
    case tensorflow::DT_UINT16: fits = StoreAs<uint16_t>(v, out); break;
    case tensorflow::DT_INT32: fits = StoreAs<int32_t>(v, out); break;
    case tensorflow::DT_UINT32: fits = StoreAs<uint32_t>(v, out); break;
    case tensorflow::DT_INT64: fits = StoreAs<int64_t>(v, out); break;
    case tensorflow::DT_UINT64: fits = StoreAs<uint64_t>(v, out); break;
    default: return "an integer feature for a " + tensorflow::DataTypeString(dtype) + " field";
  }
  if (!fits) {
    return "value " + std::to_string(v) + " does not fit " + tensorflow::DataTypeString(dtype);
  }
  return "";
}
