#include "backend/base/core_range.h"

#include <charconv>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

constexpr int kMaxCore = 4095;

bool ParseCore(std::string_view text, int& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && out >= 0 && out <= kMaxCore;
}

}  // namespace

std::string CoreRange::ToString() const {
  return first == last ? std::to_string(first) : absl::StrCat(first, "-", last);
}

absl::StatusOr<CoreRange> ParseCoreRange(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed core range '", std::string(text), "': ", std::string(why), " (expected \"N\" or \"N-M\", e.g. \"0-1\")"));
  };
  CoreRange range;
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    if (!ParseCore(text, range.first)) return bad("not a core number in 0..4095");
    range.last = range.first;
    return range;
  }
  if (!ParseCore(text.substr(0, dash), range.first) || !ParseCore(text.substr(dash + 1), range.last)) {
    return bad("both ends must be core numbers in 0..4095");
  }
  if (range.last < range.first) return bad("the range is reversed");
  return range;
}

CoreRange ReplicaCores(const CoreRange& group_cores, int count, int replica) {
  const int per_replica = group_cores.size() / count;
  const int first = group_cores.first + replica * per_replica;
  return CoreRange{first, first + per_replica - 1};
}

}  // namespace sluice
