#include "backend/reference_set.h"

#include <torch/script.h>

#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

absl::StatusOr<DataType> FromTorch(torch::ScalarType type) {
  switch (type) {
    case torch::kBool: return DataType::kBool;
    case torch::kInt32: return DataType::kInt32;
    case torch::kInt64: return DataType::kInt64;
    case torch::kHalf: return DataType::kFp16;
    case torch::kFloat32: return DataType::kFp32;
    default: return absl::InvalidArgumentError(absl::StrCat("unsupported dtype ", c10::toString(type)));
  }
}

absl::StatusOr<HostTensor> ToHost(const torch::Tensor& tensor) {
  auto dtype = FromTorch(tensor.scalar_type());
  if (!dtype.ok()) return dtype.status();
  torch::Tensor cpu = tensor.contiguous();
  HostTensor host;
  host.dtype = *dtype;
  host.shape = cpu.sizes().vec();
  const auto* begin = static_cast<const std::byte*>(cpu.data_ptr());
  host.bytes.assign(begin, begin + cpu.nbytes());
  return host;
}

}  // namespace

absl::StatusOr<std::vector<ReferenceCase>> LoadReferenceSet(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "reference.pt").string();
  std::map<std::string, torch::Tensor> buffers;
  try {
    torch::jit::Module module = torch::jit::load(path);
    for (const auto& buffer : module.named_buffers()) buffers[buffer.name] = buffer.value;
  } catch (const std::exception& e) {
    return absl::NotFoundError(absl::StrCat("cannot read reference set ", path, ": ", e.what()));
  }
  auto count = buffers.find("case_count");
  if (count == buffers.end()) return absl::InvalidArgumentError(absl::StrCat(path, ": no case_count buffer"));
  std::vector<ReferenceCase> cases(count->second.item<int64_t>());
  for (size_t k = 0; k < cases.size(); ++k) {
    for (const char* role : {"input", "output"}) {
      auto& into = std::string(role) == "input" ? cases[k].inputs : cases[k].outputs;
      for (int j = 0;; ++j) {
        auto it = buffers.find(absl::StrCat("case", k, "_", role, j));
        if (it == buffers.end()) break;
        auto host = ToHost(it->second);
        if (!host.ok()) return host.status();
        into.push_back(std::move(*host));
      }
      if (into.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": case ", k, " has no ", role));
    }
  }
  return cases;
}

}  // namespace sluice
