// Fuzzes the pricing YAML (deploy/pricing.yaml's format) through both of its entry points: sluice-loadtest's
// LoadPricingPreset (loadtest/report/pricing.h) and the server's ParseCostConfig (backend/base/cost.h, `cost: {preset,
// pricing_file}`), both for preset `fuzz.large`; both read it with sluice::LoadPricingPreset, so they must agree:
// one accepts exactly what the other accepts, with the same price. Each input is written to a scratch file.
// An accepted preset is then used: ComputeCost on a populated run summary, CostMeter's share and dollars.
// Asserts beyond "no crash, no ASan/UBSan report": an accepted price is positive and finite, accelerators >= 1
// (after the conversion to the field's type), share() in (0, 1] for the run's accelerators, cost figures that are
// non-negative numbers (never NaN; an absurdly small price may make a per-dollar ratio infinite), and server-side
// dollars that are finite and positive.
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "backend/base/cost.h"
#include "backend/base/yaml_node.h"
#include "loadtest/report/pricing.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice::fuzz {
namespace {

constexpr char kPreset[] = "fuzz.large";

void CheckPrice(double hourly_usd, int accelerators) {
  FUZZ_CHECK(std::isfinite(hourly_usd) && hourly_usd > 0, absl::StrCat("hourly_usd ", hourly_usd));
  FUZZ_CHECK(accelerators >= 1, absl::StrCat("accelerators ", accelerators));
}

void CheckLoadtestPricing(loadtest::Pricing pricing) {
  CheckPrice(pricing.hourly_usd, pricing.accelerators);
  pricing.accelerators_used = 1;
  FUZZ_CHECK(pricing.share() > 0 && pricing.share() <= 1, "share");
  loadtest::RunSummary summary;
  summary.window_s = 60;
  summary.total.ok = 600;
  summary.total.audio_seconds = 3000;
  summary.total.tokens = 12000;
  const loadtest::CostFigures cost = loadtest::ComputeCost(pricing, summary);
  for (double figure : {cost.dollars, cost.usd_per_1k_success, cost.audio_seconds_per_dollar,
                        cost.tokens_per_dollar}) {
    FUZZ_CHECK(figure >= 0, absl::StrCat("cost figure ", figure));  // false for NaN too
  }
}

void CheckServerCost(const CostConfig& cost) {
  CheckPrice(cost.hourly_usd, cost.accelerators);
  const CostMeter meter(cost, absl::UnixEpoch());
  const double share = meter.Share(1);
  FUZZ_CHECK(share > 0 && share <= 1, absl::StrCat("share ", share));
  const double dollars = meter.DollarsSoFar(1, absl::UnixEpoch() + absl::Hours(1));
  FUZZ_CHECK(std::isfinite(dollars) && dollars > 0, absl::StrCat("dollars ", dollars));
}

}  // namespace
}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  if (size > 64 * 1024) return 0;  // pricing files are small; yaml-cpp is slow on huge inputs
  const std::string path = fuzz::WriteScratchFile(data, size, "pricing.yaml");
  absl::StatusOr<loadtest::Pricing> pricing = loadtest::LoadPricingPreset(path, fuzz::kPreset);
  if (pricing.ok()) fuzz::CheckLoadtestPricing(*pricing);

  const std::string server_cost = absl::StrCat("{preset: ", fuzz::kPreset, ", pricing_file: pricing.yaml}");
  absl::StatusOr<YamlNode> node = YamlNode::LoadString(server_cost, "server.yaml");
  FUZZ_CHECK(node.ok(), "the fixed cost section parses");
  absl::StatusOr<CostConfig> cost = ParseCostConfig(*node, fuzz::ScratchDir());
  if (cost.ok()) fuzz::CheckServerCost(*cost);
  FUZZ_CHECK(pricing.ok() == cost.ok(), absl::StrCat("the readers disagree: loadtest ", pricing.status().ToString(),
                                                      ", server ", cost.status().ToString()));
  if (pricing.ok() && cost.ok()) {
    FUZZ_CHECK(pricing->hourly_usd == cost->hourly_usd && pricing->accelerators == cost->accelerators &&
                   pricing->unverified == cost->unverified && pricing->date == cost->date,
               "the readers read different prices");
  }
  return 0;
}
