#include "backend/base/tensor.h"

#include <array>
#include <utility>

namespace sluice {
namespace {

struct DataTypeInfo {
  DataType dtype;
  const char* name;
  size_t size;
};

constexpr std::array<DataTypeInfo, 5> kDataTypes = {{
    {DataType::kBool, "BOOL", 1},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kFp32, "FP32", 4},
}};

const DataTypeInfo& Info(DataType dtype) {
  for (const auto& info : kDataTypes) {
    if (info.dtype == dtype) return info;
  }
  return kDataTypes.back();  // unreachable: every enumerator is listed above
}

}  // namespace

const char* DataTypeName(DataType dtype) { return Info(dtype).name; }

size_t DataTypeSize(DataType dtype) { return Info(dtype).size; }

std::optional<DataType> ParseDataType(std::string_view name) {
  for (const auto& info : kDataTypes) {
    if (name == info.name) return info.dtype;
  }
  return std::nullopt;
}

int64_t NumElements(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(std::span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

HostTensor HostTensor::Zeros(DataType dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  t.bytes.assign(static_cast<size_t>(NumElements(shape)) * DataTypeSize(dtype), std::byte{0});
  t.shape = std::move(shape);
  return t;
}

}  // namespace sluice
