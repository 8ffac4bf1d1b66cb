#include "loadtest/pricing.h"

#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/base/yaml_node.h"

namespace sluice::loadtest {

absl::StatusOr<Pricing> LoadPricingPreset(const std::string& path, const std::string& name) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  SLUICE_ASSIGN_OR_RETURN(YamlNode presets, root.Required("presets"));
  SLUICE_RETURN_IF_ERROR(presets.ExpectMap());
  std::optional<YamlNode> preset = presets.Optional(name);
  if (!preset) return presets.Error(absl::StrCat("no preset '", name, "'"));
  SLUICE_RETURN_IF_ERROR(preset->ExpectMap());
  Pricing pricing;
  pricing.preset = name;
  SLUICE_ASSIGN_OR_RETURN(YamlNode hourly, preset->Required("hourly_usd"));
  SLUICE_ASSIGN_OR_RETURN(pricing.hourly_usd, hourly.AsDouble());
  if (!(std::isfinite(pricing.hourly_usd) && pricing.hourly_usd > 0)) return hourly.Error("must be a positive price");
  SLUICE_ASSIGN_OR_RETURN(YamlNode accelerators, preset->Required("accelerators"));
  SLUICE_ASSIGN_OR_RETURN(int64_t count, accelerators.AsInt());
  // Bounded so that the int it is stored in keeps it (4294967296 would become 0).
  if (count < 1 || count > std::numeric_limits<int>::max()) {
    return accelerators.Error(absl::StrCat("must be between 1 and ", std::numeric_limits<int>::max()));
  }
  pricing.accelerators = static_cast<int>(count);
  if (std::optional<YamlNode> source = preset->Optional("source")) {
    SLUICE_ASSIGN_OR_RETURN(pricing.source, source->AsString());
  }
  // The date: the preset's own, else the file's snapshot date.
  if (std::optional<YamlNode> date = preset->Optional("date")) {
    SLUICE_ASSIGN_OR_RETURN(pricing.date, date->AsString());
  } else if (std::optional<YamlNode> snapshot = root.Optional("snapshot")) {
    SLUICE_ASSIGN_OR_RETURN(pricing.date, snapshot->AsString());
  }
  // Unverified: an explicit flag, or a source that says so.
  if (std::optional<YamlNode> unverified = preset->Optional("unverified")) {
    SLUICE_ASSIGN_OR_RETURN(pricing.unverified, unverified->AsBool());
  }
  if (absl::StrContains(pricing.source, "UNVERIFIED")) pricing.unverified = true;
  return pricing;
}

CostFigures ComputeCost(const Pricing& pricing, const RunSummary& summary) {
  CostFigures cost;
  cost.dollars = pricing.hourly_usd * pricing.share() * summary.window_s / 3600.0;
  const ThroughputStats& t = summary.total;
  if (t.ok > 0) cost.usd_per_1k_success = cost.dollars / static_cast<double>(t.ok) * 1000.0;
  if (cost.dollars > 0) {
    cost.audio_seconds_per_dollar = t.audio_seconds / cost.dollars;
    cost.tokens_per_dollar = static_cast<double>(t.tokens) / cost.dollars;
    if (summary.generation) {
      cost.prompt_tokens_per_dollar = static_cast<double>(summary.generation->prompt_tokens) / cost.dollars;
      cost.output_tokens_per_dollar = static_cast<double>(summary.generation->output_tokens) / cost.dollars;
    }
  }
  return cost;
}

}  // namespace sluice::loadtest
