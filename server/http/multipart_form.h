// multipart/form-data bodies (RFC 7578 over RFC 2046's multipart framing), as HTML forms and OpenAI's clients send
// file uploads: the boundary from the request's Content-Type, then each part's Content-Disposition (form-data; name,
// optional filename) and optional Content-Type, and its bytes. Used by POST /v1/audio/transcriptions.
//
// Bounded and strict: the body is already within the HTTP server's body limit; the parser also bounds the part
// count and each part's header block (bytes and lines), requires CRLF line ends and the closing delimiter, and never
// reads outside `body`. Every malformed input is InvalidArgument with a message naming what is wrong (the field
// or the part, by 1-based index). A part's data is a view into `body`, never copied.
//
// Not supported, refused by name: nested multipart/mixed parts, Content-Transfer-Encoding other than 7bit, 8bit or
// binary (RFC 7578 deprecates it). `filename*` (RFC 5987) is ignored, as RFC 7578 section 4.2 tells receivers.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice {

struct MultipartLimits {
  size_t max_parts = 64;
  size_t max_part_header_bytes = 8 << 10;  // one part's header block, its blank line included
  size_t max_part_header_lines = 16;
};

struct MultipartPart {
  std::string name;                     // Content-Disposition's name (required, may be empty only if sent so)
  std::optional<std::string> filename;  // Content-Disposition's filename, when given
  std::string content_type;             // the part's Content-Type, as sent; "" when absent (text/plain)
  std::string_view data;                // a view into the body passed to ParseMultipartForm
};

struct MultipartForm {
  std::vector<MultipartPart> parts;  // in body order
};

// The boundary a Content-Type field value declares: "multipart/form-data; boundary=..." (the boundary a token or a
// quoted string, 1..70 characters of RFC 2046's bchars, not ending in a space). InvalidArgument naming the problem:
// another media type, no boundary, an empty, over-long or ill-formed one.
absl::StatusOr<std::string> MultipartBoundary(std::string_view content_type);

// Parses `body` as multipart/form-data framed by `boundary` (as MultipartBoundary returns it). A preamble before
// the first delimiter and an epilogue after the closing one are ignored, as RFC 2046 says. REQUIRES: `body`
// outlives the returned views.
absl::StatusOr<MultipartForm> ParseMultipartForm(std::string_view body, std::string_view boundary,
                                                 const MultipartLimits& limits = {});

}  // namespace sluice
