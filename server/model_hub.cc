#include "server/model_hub.h"

#include "absl/strings/str_cat.h"

namespace sluice {

void ModelHub::Publish(std::vector<std::unique_ptr<ServedModel>> models) {
  models_ = std::move(models);
  loaded_.store(true, std::memory_order_release);
}

std::span<const std::unique_ptr<ServedModel>> ModelHub::models() const {
  if (!loaded_.load(std::memory_order_acquire)) return {};
  return models_;
}

absl::StatusOr<ServedModel*> ModelHub::Find(std::string_view name_view, std::string_view version_view) const {
  if (!loaded_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("the server is loading its models; not ready yet");
  }
  const std::string name(name_view), version(version_view);
  for (const auto& model : models_) {
    if (model->config().name != name) continue;
    if (!version.empty() && version != "1") {
      return absl::NotFoundError(
          absl::StrCat("model '", name, "' has no version '", version, "' (sluice serves version 1)"));
    }
    return model.get();
  }
  return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
}

int64_t ModelHub::InFlight() const {
  int64_t total = 0;
  for (const auto& model : models()) total += model->scheduler().InFlight();
  return total;
}

void ModelHub::StopAll() {
  for (const auto& model : models()) model->scheduler().Stop();
}

}  // namespace sluice
