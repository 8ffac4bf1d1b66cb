// A contiguous range of accelerator cores ("2" or "0-3"), as NEURON_RT_VISIBLE_CORES takes it.
// Thread-safety: plain value.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sluice {

struct CoreRange {
  int first = 0;
  int last = 0;  // inclusive

  int size() const { return last - first + 1; }
  std::string ToString() const;  // "3" or "0-3"
  bool operator==(const CoreRange&) const = default;
};

// Accepts "N" or "N-M" with 0 <= N <= M < 4096; anything else is an error that quotes the text.
absl::StatusOr<CoreRange> ParseCoreRange(std::string_view text);

}  // namespace sluice
