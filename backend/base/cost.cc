#include "backend/base/cost.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"

namespace sluice {
namespace {

absl::StatusOr<CostConfig> ParsePrice(const YamlNode& node) {
  CostConfig cost;
  SLUICE_ASSIGN_OR_RETURN(YamlNode hourly, node.Required("hourly_usd"));
  SLUICE_ASSIGN_OR_RETURN(cost.hourly_usd, hourly.AsDouble());
  // NaN compares false with everything: test for what is wanted, not for what is not.
  if (!(std::isfinite(cost.hourly_usd) && cost.hourly_usd > 0)) {
    return hourly.Error("must be a positive price in USD per hour");
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode accelerators, node.Required("accelerators"));
  SLUICE_ASSIGN_OR_RETURN(int64_t count, accelerators.AsInt());
  // Bounded so that the int it is stored in keeps it (4294967296 would become 0).
  if (count < 1 || count > std::numeric_limits<int>::max()) {
    return accelerators.Error(absl::StrCat("must be between 1 and ", std::numeric_limits<int>::max()));
  }
  cost.accelerators = static_cast<int>(count);
  if (auto unit = node.Optional("unit")) {
    SLUICE_ASSIGN_OR_RETURN(cost.unit, unit->AsString());
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode source, node.Required("source"));
  SLUICE_ASSIGN_OR_RETURN(cost.source, source.AsString());
  return cost;
}

}  // namespace

absl::StatusOr<CostConfig> LoadPricingPreset(const std::string& path, const std::string& name) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  SLUICE_ASSIGN_OR_RETURN(YamlNode presets, root.Required("presets"));
  SLUICE_RETURN_IF_ERROR(presets.ExpectMap());
  std::optional<YamlNode> entry = presets.Optional(name);
  if (!entry) return absl::NotFoundError(absl::StrCat("no preset '", name, "' in ", path));
  SLUICE_RETURN_IF_ERROR(entry->ExpectMap());
  SLUICE_RETURN_IF_ERROR(entry->CheckKeys({"hourly_usd", "accelerators", "unit", "source", "date", "unverified"}));
  SLUICE_ASSIGN_OR_RETURN(CostConfig cost, ParsePrice(*entry));
  cost.preset = name;
  // The date: the preset's own, else the file's snapshot date.
  if (std::optional<YamlNode> date = entry->Optional("date")) {
    SLUICE_ASSIGN_OR_RETURN(cost.date, date->AsString());
  } else if (std::optional<YamlNode> snapshot = root.Optional("snapshot")) {
    SLUICE_ASSIGN_OR_RETURN(cost.date, snapshot->AsString());
  }
  // Unverified: an explicit flag, or a source that says so.
  if (std::optional<YamlNode> unverified = entry->Optional("unverified")) {
    SLUICE_ASSIGN_OR_RETURN(cost.unverified, unverified->AsBool());
  }
  if (absl::StrContains(cost.source, "UNVERIFIED")) cost.unverified = true;
  return cost;
}

absl::StatusOr<CostConfig> ParseCostConfig(const YamlNode& node, const std::string& config_dir) {
  if (!node.Has("preset")) {
    SLUICE_RETURN_IF_ERROR(node.CheckKeys({"hourly_usd", "accelerators", "unit", "source"}));
    return ParsePrice(node);
  }
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"preset", "pricing_file"}));
  SLUICE_ASSIGN_OR_RETURN(YamlNode preset, node.Required("preset"));
  SLUICE_ASSIGN_OR_RETURN(std::string name, preset.AsString());
  SLUICE_ASSIGN_OR_RETURN(YamlNode file, node.Required("pricing_file"));
  SLUICE_ASSIGN_OR_RETURN(std::string file_text, file.AsString());
  std::filesystem::path path(file_text);
  if (path.is_relative()) path = std::filesystem::path(config_dir) / path;
  absl::StatusOr<CostConfig> cost = LoadPricingPreset(path.lexically_normal().string(), name);
  // Point at the server config's key too (the pricing file's own errors already name their line there).
  if (absl::IsNotFound(cost.status())) return preset.Error(std::string(cost.status().message()));
  if (!cost.ok()) return file.Error(std::string(cost.status().message()));
  return cost;
}

int AcceleratorsHeld(const ModelConfig& model) {
  int held = 0;
  for (const InstanceGroup& group : model.instances) {
    switch (group.device) {
      case DeviceKind::kNeuron: held += group.cores ? group.cores->size() : group.count; break;
      case DeviceKind::kCuda: held += group.count; break;
      case DeviceKind::kCpu: held += group.count * group.intra_op_threads; break;
      case DeviceKind::kSim: held += group.count; break;
    }
  }
  return held;
}

double CostMeter::Share(int held) const {
  return std::min(1.0, static_cast<double>(held) / static_cast<double>(config_.accelerators));
}

double CostMeter::DollarsSoFar(int held, absl::Time now) const {
  return config_.hourly_usd * Share(held) * absl::ToDoubleHours(std::max(absl::ZeroDuration(), now - start_));
}

}  // namespace sluice
