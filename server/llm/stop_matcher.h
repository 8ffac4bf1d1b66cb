// Stop strings over streamed text: releases generated text as soon as it cannot be the start of a stop string,
// holds back a tail that might be, and cuts the output where a stop string first appears (the stop string itself
// is not part of the output, as in OpenAI's API).
// Thread-safety: one per sequence, used by one thread at a time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends generated text; returns what can be released now. Once a stop string appears, returns the text
  // before it, stopped() turns true and later calls return "".
  std::string Push(std::string_view text);
  // The held-back tail (no stop string completed). REQUIRES: called once, at the end.
  std::string Finish();
  bool stopped() const { return stopped_; }

 private:
  const std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace sluice
