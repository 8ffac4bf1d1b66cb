#include "loadtest/core/model_info.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sluice::loadtest {

absl::StatusOr<std::vector<ModelShare>> ParseModelMix(const std::string& text) {
  std::vector<ModelShare> mix;
  std::set<std::string> seen;
  double total = 0;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<std::string> name_weight = absl::StrSplit(part, absl::MaxSplits(':', 1));
    ModelShare share{name_weight[0], 1.0};
    if (share.model.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("model mix '", text, "': empty model name"));
    }
    if (name_weight.size() == 2 && (!absl::SimpleAtod(name_weight[1], &share.weight) || !(share.weight > 0))) {
      return absl::InvalidArgumentError(absl::StrCat("model mix '", text, "': weight of ", share.model,
                                                     " is not a positive number"));
    }
    if (!seen.insert(share.model).second) {
      return absl::InvalidArgumentError(absl::StrCat("model mix '", text, "': ", share.model, " appears twice"));
    }
    total += share.weight;
    mix.push_back(share);
  }
  for (ModelShare& share : mix) share.weight /= total;
  return mix;
}

}  // namespace sluice::loadtest
