// Input-length profiles for generated traffic: how long each request's variable axis is. Built-ins: a fixed
// length, a uniform range, a lognormal (the `speech` preset resembles LibriSpeech utterance durations), or
// lengths read from a file. Lengths are in steps of the variable axis (samples or tokens); "6s" means seconds
// and needs the model's sample rate. Every draw is clipped to [1, the model's largest bucket].
// Thread-safety: immutable after Create(); Sample() is const and uses only the caller's generator.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::loadtest {

class LengthProfile {
 public:
  // `spec` is one of:
  //   fixed:N            every request has length N
  //   uniform:A-B        uniform integer lengths in [A, B]
  //   lognormal:M,S      median M, log-space standard deviation S
  //   speech             lognormal:7s,0.6 (LibriSpeech-like: median 7 s, p10 ~ 3.2 s, p90 ~ 15 s)
  //   file:PATH          one length per line (blank lines and '#' comments skipped), drawn uniformly
  // N, A, B, M and file entries are steps, or seconds with an 's' suffix (REQUIRES sample_rate > 0 then).
  // `max_length` is the model's largest compiled bucket; draws are clipped to it.
  static absl::StatusOr<std::unique_ptr<LengthProfile>> Create(const std::string& spec, int sample_rate,
                                                               int64_t max_length);

  int64_t Sample(std::mt19937_64& rng) const;
  const std::string& spec() const { return spec_; }

  LengthProfile(const LengthProfile&) = delete;
  LengthProfile& operator=(const LengthProfile&) = delete;

 private:
  enum class Kind { kFixed, kUniform, kLognormal, kFile };
  LengthProfile() = default;
  int64_t Clip(double steps) const;

  std::string spec_;
  Kind kind_ = Kind::kFixed;
  int64_t max_length_ = 1;
  int64_t a_ = 1, b_ = 1;         // fixed (a_) and uniform [a_, b_]
  double mu_ = 0, sigma_ = 0;     // lognormal, in log-steps
  std::vector<int64_t> lengths_;  // file
};

// Parses "123" (steps) or "6.5s" (seconds × sample_rate). Fails on seconds without a sample rate.
absl::StatusOr<double> ParseLength(const std::string& text, int sample_rate);

}  // namespace sluice::loadtest
