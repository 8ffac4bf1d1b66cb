#include "loadtest/core/api.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::loadtest {

const std::vector<std::string>& ApiNames() {
  static const std::vector<std::string>* const kNames =
      new std::vector<std::string>{"kserve", "riva-offline", "riva-streaming", "openai", "triton-stream",
                                   "openai-audio"};
  return *kNames;
}

absl::string_view ApiName(Api api) { return ApiNames()[static_cast<size_t>(api)]; }

absl::StatusOr<Api> ParseApi(absl::string_view name) {
  const std::vector<std::string>& names = ApiNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Api>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--api '", name, "' is none of ", absl::StrJoin(names, ", ")));
}

}  // namespace sluice::loadtest
