#include "loadtest/report/pricing.h"

#include <cmath>
#include <limits>

#include "backend/base/cost.h"
#include "backend/base/status_macros.h"

namespace sluice::loadtest {

absl::StatusOr<Pricing> LoadPricingPreset(const std::string& path, const std::string& name) {
  SLUICE_ASSIGN_OR_RETURN(CostConfig preset, sluice::LoadPricingPreset(path, name));
  Pricing pricing;
  pricing.preset = preset.preset;
  pricing.hourly_usd = preset.hourly_usd;
  pricing.accelerators = preset.accelerators;
  pricing.source = preset.source;
  pricing.date = preset.date;
  pricing.unverified = preset.unverified;
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
