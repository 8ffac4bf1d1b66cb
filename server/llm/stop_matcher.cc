#include "server/llm/stop_matcher.h"

#include <algorithm>

namespace sluice {

std::string StopMatcher::Push(std::string_view text) {
  if (stopped_) return "";
  held_.append(text);
  size_t first_stop = std::string::npos;
  for (const std::string& stop : stops_) {
    if (!stop.empty()) first_stop = std::min(first_stop, held_.find(stop));
  }
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string released = held_.substr(0, first_stop);
    held_.clear();
    return released;
  }
  // Hold the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    if (stop.empty()) continue;
    for (size_t k = std::min(stop.size() - 1, held_.size()); k > hold; --k) {
      if (held_.compare(held_.size() - k, k, stop, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string released = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return released;
}

std::string StopMatcher::Finish() {
  if (stopped_) return "";
  std::string rest;
  rest.swap(held_);
  return rest;
}

}  // namespace sluice
