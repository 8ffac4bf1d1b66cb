// The one table between absl::Status codes and the wire: the HTTP status a server answers for each code, and
// the code a client reads back from an HTTP status. gRPC status codes share absl's numbers, so a gRPC front end
// or client converts with a cast. The server's front ends and sluice-loadtest's HTTP client both use this table,
// so a refusal is classified the same way on either side of the wire.
// OutOfRange is used for "body or message over the limit" (413).
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// The HTTP status the server answers for `code`.
int HttpStatusFor(absl::StatusCode code);
inline int HttpStatusFor(const absl::Status& status) { return HttpStatusFor(status.code()); }

// The code a client assigns to an HTTP status (the inverse of HttpStatusFor where it is one-to-one; other
// 4xx are FailedPrecondition, other 5xx Internal).
absl::StatusCode StatusCodeForHttp(int http_status);

// The request field an error is about ("max_tokens", "prompt", "messages", "temperature", "top_p", "top_k", "stop"),
// attached to a refusal as a payload, so that a front end can name it (OpenAI's error "param"); "" when none.
// Here, beside the code table, because the decoders (in every build, the fuzz targets' included) and the
// generation path both attach it.
absl::Status WithRequestField(absl::Status status, absl::string_view field);
std::string RequestField(const absl::Status& status);

}  // namespace sluice
