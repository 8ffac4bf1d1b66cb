#include "loadtest/core/length_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "backend/base/status_macros.h"

namespace sluice::loadtest {

absl::StatusOr<double> ParseLength(const std::string& text, int sample_rate) {
  absl::string_view body = absl::StripAsciiWhitespace(text);
  const bool seconds = absl::ConsumeSuffix(&body, "s");
  double value = 0;
  if (!absl::SimpleAtod(body, &value) || !std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("length '", text, "' is not a positive number"));
  }
  if (!seconds) return value;
  if (sample_rate <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("length '", text, "' is in seconds, but the model has no sample rate"));
  }
  return value * sample_rate;
}

absl::StatusOr<std::unique_ptr<LengthProfile>> LengthProfile::Create(const std::string& spec, int sample_rate,
                                                                     int64_t max_length) {
  std::unique_ptr<LengthProfile> p(new LengthProfile());
  p->spec_ = spec;
  p->max_length_ = std::max<int64_t>(1, max_length);
  std::string expanded = spec == "speech" ? "lognormal:7s,0.6" : spec;
  const size_t colon = expanded.find(':');
  const std::string kind = expanded.substr(0, colon);
  const std::string args = colon == std::string::npos ? "" : expanded.substr(colon + 1);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("length profile '", spec, "': ", why,
                                                   " (expected fixed:N, uniform:A-B, lognormal:MEDIAN,SIGMA, "
                                                   "speech or file:PATH)"));
  };
  if (kind == "fixed") {
    SLUICE_ASSIGN_OR_RETURN(double n, ParseLength(args, sample_rate));
    p->kind_ = Kind::kFixed;
    p->a_ = p->Clip(n);
  } else if (kind == "uniform") {
    std::vector<std::string> ab = absl::StrSplit(args, '-');
    if (ab.size() != 2) return bad("uniform needs A-B");
    SLUICE_ASSIGN_OR_RETURN(double a, ParseLength(ab[0], sample_rate));
    SLUICE_ASSIGN_OR_RETURN(double b, ParseLength(ab[1], sample_rate));
    if (a > b) return bad("A > B");
    p->kind_ = Kind::kUniform;
    p->a_ = p->Clip(a);
    p->b_ = p->Clip(b);
  } else if (kind == "lognormal") {
    std::vector<std::string> ms = absl::StrSplit(args, ',');
    double sigma = 0;
    if (ms.size() != 2 || !absl::SimpleAtod(ms[1], &sigma) || !(sigma >= 0)) return bad("lognormal needs MEDIAN,SIGMA");
    SLUICE_ASSIGN_OR_RETURN(double median, ParseLength(ms[0], sample_rate));
    p->kind_ = Kind::kLognormal;
    p->mu_ = std::log(median);
    p->sigma_ = sigma;
  } else if (kind == "file") {
    std::ifstream in(args);
    if (!in) return absl::NotFoundError(absl::StrCat("length profile '", spec, "': cannot open '", args, "'"));
    std::string line;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
      const std::string content = line.substr(0, line.find('#'));  // outlives `body`, a view into it
      absl::string_view body = absl::StripAsciiWhitespace(content);
      if (body.empty()) continue;
      absl::StatusOr<double> n = ParseLength(std::string(body), sample_rate);
      if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(args, ":", line_no, ": ", n.status().message()));
      p->lengths_.push_back(p->Clip(*n));
    }
    if (p->lengths_.empty()) return bad("the file holds no lengths");
    p->kind_ = Kind::kFile;
  } else {
    return bad("unknown kind");
  }
  return p;
}

int64_t LengthProfile::Clip(double steps) const {
  return std::clamp<int64_t>(static_cast<int64_t>(std::llround(steps)), 1, max_length_);
}

int64_t LengthProfile::Sample(std::mt19937_64& rng) const {
  switch (kind_) {
    case Kind::kFixed: return a_;
    case Kind::kUniform: return std::uniform_int_distribution<int64_t>(a_, b_)(rng);
    case Kind::kLognormal: return Clip(std::lognormal_distribution<double>(mu_, sigma_)(rng));
    case Kind::kFile: return lengths_[std::uniform_int_distribution<size_t>(0, lengths_.size() - 1)(rng)];
  }
  return a_;
}

}  // namespace sluice::loadtest
