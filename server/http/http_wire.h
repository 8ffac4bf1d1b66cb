// HTTP/1.1 wire format pieces for HttpConnection: the request parser's configuration, response heads, chunk framing,
// the {"error": "..."} bodies of the server's own error responses, and the mapping of request parse errors to a
// status and a message. (tests/fuzz/fuzz_http_request.cc drives the same parser configuration.)
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "boost/beast/core/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "server/http/http_exchange.h"

namespace sluice {

// HttpConnection's request parser: Beast's, with the server's limits. header_limit is max_header_bytes + 1: one byte
// over the limit is what tells an over-long head from one that just fits (the caller also checks the whole head,
// as Beast may leave part of it unconsumed); body_limit is max_body_bytes (chunked bodies included).
using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;
void ConfigureRequestParser(int64_t max_header_bytes, int64_t max_body_bytes, RequestParser& parser);

// A field value without the optional whitespace around it.
std::string_view TrimFieldValue(boost::beast::string_view value);

// The Content-Length a head declared: a decimal integer, or a list of identical ones ("8, 8", which Beast frames
// the body by). Not parser.content_length(): that requires a complete head, and an over-limit Content-Length is
// refused while the head is being finished.
std::optional<uint64_t> DeclaredContentLength(const RequestParser& parser);

// The status line and fields of a response, through the blank line. content_length nullopt: the body is chunked
// (http10 false) or ends at close (http10 true). Connection: close when !keep_alive; Connection: keep-alive for an
// HTTP/1.0 client that keeps the connection.
struct ResponseHead {
  int status = 200;
  std::string_view content_type;
  const HttpHeaders* extra = nullptr;  // may be null
  std::optional<uint64_t> content_length;
  bool keep_alive = true;
  bool http10 = false;
};
std::string SerializeResponseHead(const ResponseHead& head);

// One chunk of a chunked body: hex size CRLF data CRLF. REQUIRES: !data.empty().
std::string FrameChunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// ASCII case-insensitive comparison (field names, tokens). Debian's absl::string_view is not std::string_view,
// so absl::EqualsIgnoreCase does not take these.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// {"error":"<message>"} with the message JSON-escaped.
std::string JsonError(std::string_view message);

// A complete response (head + JSON error body) for the server's own errors; always Connection: close.
std::string SerializeErrorResponse(int status, std::string_view message);

// Why a request was refused before reaching the handler.
struct RequestError {
  int status = 400;
  std::string message;
};
// `content_length`: what the head declared, if it did. max_*: the limits, for the messages.
RequestError MapParseError(const boost::beast::error_code& ec, std::optional<uint64_t> content_length,
                           int64_t max_header_bytes, int64_t max_body_bytes);

}  // namespace sluice
