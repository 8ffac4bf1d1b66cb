// Fuzzes the event-driven HTTP server's request parsing: Beast's request parser configured by the server's own
// ConfigureRequestParser (server/http/http_wire.h), driven the way HttpConnection::Parse drives it (bytes arrive in
// pieces; the head limit is on the whole head; a need_more with nothing consumed is over the head limit or waits;
// a chunk header over the head limit is refused; Transfer-Encoding other than chunked is refused; pipelined
// requests follow one another), errors mapped by MapParseError and rendered by SerializeErrorResponse.
// The emulation's own decisions (the read cap while a head comes in, the whole-head check) mirror HttpConnection's.
// Input: byte 0 picks the limits (the server's defaults, or the smallest head limit a config allows with a 4 KiB
// body limit), byte 1 the size of the pieces the bytes arrive in (1..64, or all at once), then the raw bytes.
// Asserts beyond "no crash, no ASan/UBSan report": the parser never consumes more than it was given and never
// stalls on a head it has all of; a completed request's body is within max_body_bytes, a non-chunked body exactly
// its Content-Length; a refusal is 400, 413 (only for a body over the limit: a declared Content-Length is over it)
// or 431 with a message, rendered as a complete response with Connection: close and a matching Content-Length.
#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "boost/asio/buffer.hpp"
#include "boost/beast/http/error.hpp"
#include "server/http/http_wire.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice::fuzz {
namespace {

namespace http = boost::beast::http;

struct Limits {
  int64_t max_header_bytes;
  int64_t max_body_bytes;
};

void CheckRefusal(const RequestError& error, std::optional<uint64_t> content_length, const Limits& limits) {
  FUZZ_CHECK(error.status == 400 || error.status == 413 || error.status == 431, absl::StrCat(error.status));
  FUZZ_CHECK(!error.message.empty(), "a refusal says why");
  if (error.status == 413 && content_length) {
    FUZZ_CHECK(*content_length > static_cast<uint64_t>(limits.max_body_bytes), error.message);
  }
  const std::string response = SerializeErrorResponse(error.status, error.message);
  const size_t end = response.find("\r\n\r\n");
  FUZZ_CHECK(response.rfind("HTTP/1.1 ", 0) == 0 && end != std::string::npos, response);
  const std::string head = response.substr(0, end);
  FUZZ_CHECK(head.find("Connection: close") != std::string::npos, head);
  FUZZ_CHECK(head.find(absl::StrCat("Content-Length: ", response.size() - end - 4)) != std::string::npos, head);
}

// One connection's worth of bytes, as HttpConnection::Parse consumes them. Returns when the input is used up or a
// request is refused (the connection then only lingers).
void RunConnection(std::string_view bytes, size_t piece, const Limits& limits) {
  std::string in;
  bool in_body = false;
  size_t head_consumed = 0;
  const size_t max_head = static_cast<size_t>(limits.max_header_bytes);
  auto parser = std::make_unique<RequestParser>();
  ConfigureRequestParser(limits.max_header_bytes, limits.max_body_bytes, *parser);
  while (!bytes.empty()) {
    size_t take = std::min(piece, bytes.size());
    if (!in_body) {  // MaybeRead: while a head is coming, at most max_header_bytes + 1 bytes of it are let in
      const size_t head = head_consumed + in.size();
      const size_t room = head <= max_head ? max_head + 1 - head : 0;
      FUZZ_CHECK(room > 0, "reading stalled in the head (the parser neither finished nor refused it)");
      take = std::min(take, room);
    }
    in.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
    while (true) {
      if (in_body && parser->is_done()) {
        const auto& message = parser->get();
        FUZZ_CHECK(message.body().size() <= static_cast<size_t>(limits.max_body_bytes), "body over the limit");
        if (!parser->chunked()) {
          const std::optional<uint64_t> declared = DeclaredContentLength(*parser);
          FUZZ_CHECK(message.body().size() == declared.value_or(0),
                     absl::StrCat("body of ", message.body().size(), " bytes"));
        }
        parser = std::make_unique<RequestParser>();  // the next, pipelined request
        ConfigureRequestParser(limits.max_header_bytes, limits.max_body_bytes, *parser);
        in_body = false;
        head_consumed = 0;
      }
      if (in.empty()) break;
      boost::beast::error_code ec;
      const size_t used = parser->put(boost::asio::buffer(in), ec);
      FUZZ_CHECK(used <= in.size(), "consumed more than it was given");
      in.erase(0, used);
      if (!in_body) head_consumed += used;
      if (ec == http::error::need_more) {
        if (used > 0) continue;
        if (!in_body && head_consumed + in.size() > static_cast<size_t>(limits.max_header_bytes)) {
          ec = http::error::header_limit;
        } else if (in_body && in.size() >= static_cast<size_t>(limits.max_header_bytes)) {
          return;  // 400: a chunk header over the header limit
        } else {
          break;  // wait for more bytes
        }
      }
      if (ec) {
        const std::optional<uint64_t> declared = DeclaredContentLength(*parser);
        CheckRefusal(MapParseError(ec, declared, limits.max_header_bytes, limits.max_body_bytes), declared, limits);
        return;
      }
      if (!in_body && parser->is_header_done()) {
        if (head_consumed > max_head) {  // HttpConnection::Parse: the whole head is over the limit
          CheckRefusal(MapParseError(http::error::header_limit, std::nullopt, limits.max_header_bytes,
                                     limits.max_body_bytes),
                       std::nullopt, limits);
          return;
        }
        const auto& head = parser->get();
        if (head.find(http::field::transfer_encoding) != head.end() && !parser->chunked()) return;  // 400
        (void)EqualsIgnoreCase(TrimFieldValue(head[http::field::expect]), "100-continue");
        in_body = true;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice::fuzz;
  if (size < 2) return 0;
  static constexpr Limits kLimits[] = {{16 << 10, 64 << 20}, {1024, 4096}};
  const Limits& limits = kLimits[data[0] % 2];
  const size_t piece = data[1] % 65 == 0 ? size : data[1] % 65;
  RunConnection(std::string_view(reinterpret_cast<const char*>(data) + 2, size - 2), piece, limits);
  return 0;
}
