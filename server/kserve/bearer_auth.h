// The bearer-token check both transports apply: "Authorization: Bearer <token>" (HTTP header; gRPC metadata
// "authorization"). The scheme name is case-insensitive (RFC 7235 section 2.1); the token is compared in
// constant time so its bytes cannot be guessed from response timing.
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace sluice {

// OK when `token` is empty (no check configured) or `header` carries it; otherwise Unauthenticated saying
// whether the header is missing, malformed or holds another token.
absl::Status CheckBearer(std::optional<std::string_view> header, const std::string& token);

}  // namespace sluice
