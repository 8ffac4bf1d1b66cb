// A safetensors file's index (the documented format: an 8-byte little-endian header length, a JSON header
// mapping each tensor name to {dtype, shape, data_offsets: [begin, end)} relative to the end of the header, then
// the raw little-endian bytes), read without loading the data, and single tensors read on demand.
// Thread-safety: immutable after Open(); ReadTensor opens its own stream, so concurrent calls are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice {

struct SafetensorsEntry {
  std::string dtype;  // as written: "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // absolute file offsets of the bytes
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Reads and checks the header: sizes within the file, each tensor's byte count = elements x dtype size
  // (for the dtypes sluice knows). Errors name the file and the tensor.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& tensors() const { return tensors_; }
  // NotFound naming the file when `name` is not in it.
  absl::StatusOr<const SafetensorsEntry*> Find(const std::string& name) const;
  absl::StatusOr<std::vector<std::byte>> ReadTensor(const std::string& name) const;

 private:
  std::string path_;
  std::map<std::string, SafetensorsEntry> tensors_;
};

// Bytes per element of a safetensors dtype string; 0 when unknown.
size_t SafetensorsDtypeSize(const std::string& dtype);

}  // namespace sluice
