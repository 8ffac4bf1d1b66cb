// Torch-free tensors that cross the backend seam: a dtype, a shape and owned bytes.
// Everything outside backend/ speaks these types, so libtorch headers stay inside backend/.
// Thread-safety: plain values; no internal synchronisation.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

// Names follow the KServe v2 / Triton datatype strings ("FP32", "INT64", ...).
enum class DataType { kBool, kInt32, kInt64, kFp16, kFp32 };

const char* DataTypeName(DataType dtype);
std::optional<DataType> ParseDataType(std::string_view name);
size_t DataTypeSize(DataType dtype);

int64_t NumElements(std::span<const int64_t> shape);
std::string ShapeToString(std::span<const int64_t> shape);

// A dense, row-major tensor in host memory.
struct HostTensor {
  DataType dtype = DataType::kFp32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;

  // A zero-filled tensor of the given dtype and shape.
  static HostTensor Zeros(DataType dtype, std::vector<int64_t> shape);

  int64_t num_elements() const { return NumElements(shape); }

  // REQUIRES: sizeof(T) == DataTypeSize(dtype) (the caller's responsibility; assert()ed in builds without NDEBUG).
  template <typename T>
  std::span<T> values() {
    assert(sizeof(T) == DataTypeSize(dtype));
    return {reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
  template <typename T>
  std::span<const T> values() const {
    assert(sizeof(T) == DataTypeSize(dtype));
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
};

}  // namespace sluice
