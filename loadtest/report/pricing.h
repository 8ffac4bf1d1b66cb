// What the measured hardware costs, and the cost figures of a run. Prices come from the pricing config the
// server's metrics use (deploy/pricing.yaml: `presets: {NAME: {hourly_usd, accelerators, unit, source}}`) or
// from the command line. The server's share of the instance = accelerators it uses ÷ the instance's total.
//   dollars                  = hourly_usd × share × measured window seconds / 3600
//   $ per 1k successful      = dollars / successful requests × 1000
//   audio-seconds per dollar = audio seconds of successful requests / dollars
//   tokens per dollar        = tokens of successful text requests / dollars
//   prompt / output tokens per dollar = generation: usage's prompt / completion tokens of successful requests /
//                              dollars (apart: prompt tokens are far cheaper to serve than output tokens)
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "loadtest/core/summary.h"

namespace sluice::loadtest {

struct Pricing {
  std::string preset;       // empty for a price given on the command line
  double hourly_usd = 0;    // the whole instance, on demand
  int accelerators = 1;     // the instance's NeuronCores / GPUs / CPU cores
  int accelerators_used = 0;  // the server's; 0 means all of them
  std::string source, date;
  bool unverified = false;

  double share() const {
    return accelerators_used > 0 && accelerators > 0 ? static_cast<double>(accelerators_used) / accelerators : 1.0;
  }
};

// Reads preset `name` from a pricing YAML with the server's own reader (sluice::LoadPricingPreset in
// backend/base/cost.h), so a file one accepts the other accepts: keys hourly_usd, accelerators, source, and
// optional unit, date, unverified. Without a `date`, the file's top-level `snapshot` is the date; a source
// containing "UNVERIFIED" marks the price unverified.
absl::StatusOr<Pricing> LoadPricingPreset(const std::string& path, const std::string& name);

struct CostFigures {
  double dollars = 0;
  double usd_per_1k_success = 0;      // 0 when nothing succeeded
  double audio_seconds_per_dollar = 0;
  double tokens_per_dollar = 0;
  double prompt_tokens_per_dollar = 0, output_tokens_per_dollar = 0;  // generation (usage of successful requests)
};

CostFigures ComputeCost(const Pricing& pricing, const RunSummary& summary);

}  // namespace sluice::loadtest
