// The one table between absl::Status codes and the wire: the HTTP status a server answers for each code, and
// the code a client reads back from an HTTP status. gRPC status codes share absl's numbers, so a gRPC front end
// or client converts with a cast. The server's front ends and sluice-loadtest's HTTP client both use this table,
// so a refusal is classified the same way on either side of the wire.
// OutOfRange is used for "body or message over the limit" (413).
// Thread-safety: pure functions.
#pragma once

#include "absl/status/status.h"

namespace sluice {

// The HTTP status the server answers for `code`.
int HttpStatusFor(absl::StatusCode code);
inline int HttpStatusFor(const absl::Status& status) { return HttpStatusFor(status.code()); }

// The code a client assigns to an HTTP status (the inverse of HttpStatusFor where it is one-to-one; other
// 4xx are FailedPrecondition, other 5xx Internal).
absl::StatusCode StatusCodeForHttp(int http_status);

}  // namespace sluice
