// One mapping from absl::Status to the wire: HTTP status codes and gRPC status codes (absl and gRPC codes share
// numbers). OutOfRange is used for "body or message over the limit".
// Thread-safety: pure functions.
#pragma once

#include "absl/status/status.h"

namespace sluice {

inline int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kOutOfRange: return 413;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

}  // namespace sluice
