#include "server/core/infer_parameters.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {

// The value as an integer in [0, max], or an error naming the parameter, its value and the range.
absl::StatusOr<uint64_t> UnsignedInRange(const std::string& key, const ParameterValue& value, uint64_t max,
                                         const char* meaning) {
  std::optional<uint64_t> number;
  if (const int64_t* v = std::get_if<int64_t>(&value)) {
    if (*v >= 0) number = static_cast<uint64_t>(*v);
  } else if (const uint64_t* v = std::get_if<uint64_t>(&value)) {
    number = *v;
  } else if (!std::holds_alternative<double>(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", key, "' must be an integer (", meaning, "), got ", ParameterText(value)));
  }
  if (!number || *number > max) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' is ", ParameterText(value),
                                                   "; it must be an integer from 0 to ", max, " (", meaning, ")"));
  }
  return *number;
}

}  // namespace

std::string ParameterText(const ParameterValue& value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    std::string operator()(uint64_t v) const { return absl::StrCat(v); }
    std::string operator()(double v) const { return absl::StrFormat("%g", v); }
    std::string operator()(const std::string& v) const { return absl::StrCat("\"", v, "\""); }
  };
  return std::visit(Visitor{}, value);
}

absl::StatusOr<InferOptions> ParseInferParameters(const InferParameters& parameters, int priority_levels,
                                                  absl::Time now) {
  InferOptions options;
  for (const auto& [key, value] : parameters) {
    if (key == "priority") {
      absl::StatusOr<uint64_t> priority = UnsignedInRange(
          key, value, static_cast<uint64_t>(priority_levels), "0 = the model's default level, 1 = highest");
      if (!priority.ok()) return priority.status();
      options.priority = static_cast<int>(*priority);
    } else if (key == "timeout") {
      absl::StatusOr<uint64_t> micros =
          UnsignedInRange(key, value, std::numeric_limits<int64_t>::max(), "microseconds, 0 = no timeout");
      if (!micros.ok()) return micros.status();
      if (*micros > 0) {
        options.deadline = std::min(options.deadline, now + absl::Microseconds(static_cast<int64_t>(*micros)));
      }
    } else if (key == "binary_data_output") {
      const bool* flag = std::get_if<bool>(&value);
      if (flag == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter 'binary_data_output' must be a boolean, got ", ParameterText(value)));
      }
      options.binary_data_output = *flag;
    }
  }
  return options;
}

}  // namespace sluice
