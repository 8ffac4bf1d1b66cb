// A contiguous range of cores ("2" or "0-3"): NeuronCores as NEURON_RT_VISIBLE_CORES takes them (device neuron),
// or CPUs as sched_setaffinity takes them (device cpu).
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

// The slice of `group_cores` that replica `replica` of `count` owns: the group's cores split evenly, in order
// ("0-3" over 2 replicas: "0-1" and "2-3").
// REQUIRES: group_cores.size() % count == 0 and 0 <= replica < count (config validation guarantees both).
CoreRange ReplicaCores(const CoreRange& group_cores, int count, int replica);

}  // namespace sluice
