#include "loadtest/core/arrival_process.h"

#include "absl/strings/str_cat.h"

namespace sluice::loadtest {

absl::StatusOr<ArrivalKind> ParseArrivalKind(const std::string& name) {
  if (name == "poisson") return ArrivalKind::kPoisson;
  if (name == "gamma") return ArrivalKind::kGamma;
  if (name == "constant") return ArrivalKind::kConstant;
  return absl::InvalidArgumentError(absl::StrCat("unknown arrival process '", name,
                                                 "' (expected poisson, gamma or constant)"));
}

const char* ArrivalKindName(ArrivalKind kind) {
  switch (kind) {
    case ArrivalKind::kPoisson: return "poisson";
    case ArrivalKind::kGamma: return "gamma";
    case ArrivalKind::kConstant: return "constant";
  }
  return "?";
}

// Gamma(shape k, scale θ) has mean kθ; θ = 1 / (k R) keeps the mean gap at 1/R.
ArrivalProcess::ArrivalProcess(ArrivalKind kind, double rate, double burstiness, uint64_t seed)
    : kind_(kind),
      rate_(rate),
      rng_(seed),
      exponential_(rate),
      gamma_(burstiness, 1.0 / (burstiness * rate)) {}

double ArrivalProcess::NextGap() {
  switch (kind_) {
    case ArrivalKind::kPoisson: return exponential_(rng_);
    case ArrivalKind::kGamma: return gamma_(rng_);
    case ArrivalKind::kConstant: return 1.0 / rate_;
  }
  return 1.0 / rate_;
}

}  // namespace sluice::loadtest
