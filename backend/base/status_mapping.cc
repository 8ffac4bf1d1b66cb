#include "backend/base/status_mapping.h"

#include <utility>

#include "absl/strings/cord.h"

namespace sluice {
namespace {

using absl::StatusCode;

// One row per code that has an HTTP status of its own; the first row for a status is its inverse.
constexpr std::pair<StatusCode, int> kTable[] = {
    {StatusCode::kOk, 200},
    {StatusCode::kInvalidArgument, 400},
    {StatusCode::kUnauthenticated, 401},
    {StatusCode::kPermissionDenied, 403},
    {StatusCode::kNotFound, 404},
    {StatusCode::kDeadlineExceeded, 504},
    {StatusCode::kOutOfRange, 413},
    {StatusCode::kResourceExhausted, 429},
    {StatusCode::kCancelled, 499},  // nginx's "client closed request": the client withdrew it
    {StatusCode::kUnavailable, 503},
    {StatusCode::kUnimplemented, 501},
    {StatusCode::kInternal, 500},
};

}  // namespace

int HttpStatusFor(StatusCode code) {
  for (const auto& [c, http] : kTable) {
    if (c == code) return http;
  }
  return 500;
}

StatusCode StatusCodeForHttp(int http_status) {
  if (http_status == 408) return StatusCode::kDeadlineExceeded;  // request timeout (reading the request)
  if (http_status == 431) return StatusCode::kOutOfRange;        // header fields over the limit
  for (const auto& [code, http] : kTable) {
    if (http == http_status) return code;
  }
  return http_status >= 500 ? StatusCode::kInternal : StatusCode::kFailedPrecondition;
}

namespace {
constexpr char kFieldPayload[] = "type.sluice/request-field";
}  // namespace

absl::Status WithRequestField(absl::Status status, absl::string_view field) {
  if (!field.empty()) status.SetPayload(kFieldPayload, absl::Cord(field));
  return status;
}

std::string RequestField(const absl::Status& status) {
  absl::optional<absl::Cord> field = status.GetPayload(kFieldPayload);
  return field ? std::string(*field) : std::string();
}

}  // namespace sluice
