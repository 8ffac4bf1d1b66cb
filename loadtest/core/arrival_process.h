// Open-loop arrival times: the gaps between request sends at a mean rate R. Poisson (exponential gaps),
// Gamma with shape = burstiness (as in vLLM's benchmark: 1 is Poisson, < 1 burstier, > 1 smoother; the mean
// gap stays 1/R), or constant gaps. Deterministic for a seed.
// Thread-safety: not thread-safe; one owner draws the schedule.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"

namespace sluice::loadtest {

enum class ArrivalKind { kPoisson, kGamma, kConstant };

absl::StatusOr<ArrivalKind> ParseArrivalKind(const std::string& name);
const char* ArrivalKindName(ArrivalKind kind);

class ArrivalProcess {
 public:
  // REQUIRES: rate > 0; burstiness > 0 (used only by kGamma).
  ArrivalProcess(ArrivalKind kind, double rate, double burstiness, uint64_t seed);

  // Seconds from the previous arrival to the next one.
  double NextGap();

 private:
  ArrivalKind kind_;
  double rate_;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> exponential_;
  std::gamma_distribution<double> gamma_;
};

}  // namespace sluice::loadtest
