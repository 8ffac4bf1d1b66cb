// Request parameters, decoded from any wire format into one neutral type and parsed by one parser, so every
// front end gives the same answers for the same values. Known keys (Triton's schedule-policy parameters and the
// KServe binary-data extension):
//   priority            integer 0..priority_levels of the model (0 = the model's default level, 1 = highest)
//   timeout             integer microseconds, 0..2^63-1; tightens the request's deadline (0 = none)
//   binary_data_output  boolean (HTTP: answer every output as binary data unless an output says otherwise)
// Integers are checked exactly: a uint64 or JSON number that does not fit is refused naming its value and the
// allowed range, never truncated. Other keys are accepted and ignored, as Triton does for custom parameters.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sluice {

// One parameter as the wire carried it. JSON numbers that are not integers arrive as double.
using ParameterValue = std::variant<bool, int64_t, uint64_t, double, std::string>;
using InferParameters = std::vector<std::pair<std::string, ParameterValue>>;

struct InferOptions {
  absl::Time deadline = absl::InfiniteFuture();
  int priority = 0;
  std::optional<bool> binary_data_output;
};

// `priority_levels`: the model's level count. `now` anchors `timeout`. InvalidArgument naming the parameter,
// the value it had and what is allowed.
absl::StatusOr<InferOptions> ParseInferParameters(const InferParameters& parameters, int priority_levels,
                                                  absl::Time now);

// A wire value as text for messages: 4294967297, true, "abc", 1.5.
std::string ParameterText(const ParameterValue& value);

}  // namespace sluice
