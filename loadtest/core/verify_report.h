// What --verify found for one model, whatever API checked it (kserve/verify.h: outputs against the exported
// reference set; generation/generation_app.h: generated tokens against the reference generations), as the reports
// print and write it (report/).
// Thread-safety: a plain struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::loadtest {

struct VerifyReport {
  std::string model;
  double tolerance = 1e-4;
  int cases = 0;
  int mismatched_cases = 0;   // wrong shape, an element over tolerance, or a failed call
  int failed_calls = 0;
  int64_t mismatched_elements = 0;
  double max_abs_error = 0;
  std::vector<std::string> failures;  // the first few, described
  // Generation (generation_app.h): cases compared token for token; mismatched_elements counts the reference tokens
  // from each mismatched case's first differing token on.
  bool generation = false;

  bool ok() const { return cases > 0 && mismatched_cases == 0; }
};

}  // namespace sluice::loadtest
