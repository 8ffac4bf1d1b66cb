// A copy of an absl::Status that shares no state with the original, for an answer handed to another thread.
// absl::Status copies share one reference-counted rep (an error's message and payloads), and Debian's Abseil drops
// the last reference inside its uninstrumented library: one thread releasing its copy after another thread released
// its own looks to ThreadSanitizer like an unordered delete, and fails the TSan run (seen in CI, stop 38, on the
// continuous batcher's answers). OK statuses carry no rep and are returned as they are.
// Thread-safety: a pure function; `status` must not be modified concurrently.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace sluice {

inline absl::Status Unshared(const absl::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status copy(status.code(), status.message());
  status.ForEachPayload([&copy](absl::string_view url, const absl::Cord& payload) {
    copy.SetPayload(url, absl::Cord(std::string(payload)));  // a flat copy: Cords share their nodes too
  });
  return copy;
}

}  // namespace sluice
