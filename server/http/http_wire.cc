#include "server/http/http_wire.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/status.hpp"

namespace sluice {
namespace {

namespace http = boost::beast::http;

// Fields the server writes itself; a handler's copy would contradict the framing or the keep-alive decision.
bool IsServerOwnedField(std::string_view name) {
  return EqualsIgnoreCase(name, "content-length") || EqualsIgnoreCase(name, "transfer-encoding") ||
         EqualsIgnoreCase(name, "connection") || EqualsIgnoreCase(name, "content-type");
}

// CR/LF in a name or value would let a handler's data start a new field or a new response (response splitting).
bool IsSafeFieldText(std::string_view text) {
  for (char c : text) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

}  // namespace

void ConfigureRequestParser(int64_t max_header_bytes, int64_t max_body_bytes, RequestParser& parser) {
  parser.header_limit(static_cast<uint32_t>(std::min<int64_t>(max_header_bytes + 1, UINT32_MAX)));
  parser.body_limit(static_cast<uint64_t>(max_body_bytes));
}

std::string_view TrimFieldValue(boost::beast::string_view value) {
  std::string_view text(value.data(), value.size());
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::optional<uint64_t> DeclaredContentLength(const RequestParser& parser) {
  // RFC 9110 8.6 lets a recipient take "8, 8" (a list of identical values, as a proxy that merged fields writes)
  // as 8, and Beast does: a body framed by such a head must be read as that length here too.
  std::string_view rest = TrimFieldValue(parser.get()[http::field::content_length]);
  std::optional<uint64_t> length;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item =
        TrimFieldValue(boost::beast::string_view(rest.data(), std::min(comma, rest.size())));
    uint64_t value = 0;
    const char* end = item.data() + item.size();
    if (item.empty() || std::from_chars(item.data(), end, value).ptr != end) {
      return std::nullopt;
    }
    if (length.has_value() && *length != value) return std::nullopt;
    length = value;
    if (comma == std::string_view::npos) return length;
    rest.remove_prefix(comma + 1);
  }
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x != y && std::tolower(x) != std::tolower(y)) return false;
  }
  return true;
}

std::string SerializeResponseHead(const ResponseHead& head) {
  std::string reason(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(head.status))));
  std::string out = absl::StrCat(head.http10 ? "HTTP/1.0 " : "HTTP/1.1 ", head.status, " ", reason, "\r\n");
  if (!head.content_type.empty() && IsSafeFieldText(head.content_type)) {
    out.append("Content-Type: ").append(head.content_type).append("\r\n");
  }
  if (head.content_length.has_value()) {
    absl::StrAppend(&out, "Content-Length: ", *head.content_length, "\r\n");
  } else if (!head.http10) {
    out += "Transfer-Encoding: chunked\r\n";
  }
  if (!head.keep_alive) {
    out += "Connection: close\r\n";
  } else if (head.http10) {
    out += "Connection: keep-alive\r\n";
  }
  if (head.extra != nullptr) {
    for (const auto& [name, value] : *head.extra) {
      if (name.empty() || IsServerOwnedField(name) || !IsSafeFieldText(name) || !IsSafeFieldText(value)) continue;
      out.append(name).append(": ").append(value).append("\r\n");
    }
  }
  out += "\r\n";
  return out;
}

std::string FrameChunk(std::string_view data) {
  char size[20];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out;
  out.reserve(data.size() + 24);
  out.append(size).append(data).append("\r\n");
  return out;
}

std::string JsonError(std::string_view message) {
  std::string out = "{\"error\":\"";
  for (char c : message) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += "\"}";
  return out;
}

std::string SerializeErrorResponse(int status, std::string_view message) {
  std::string body = JsonError(message);
  ResponseHead head;
  head.status = status;
  head.content_type = "application/json";
  head.content_length = body.size();
  head.keep_alive = false;
  return SerializeResponseHead(head) + body;
}

RequestError MapParseError(const boost::beast::error_code& ec, std::optional<uint64_t> content_length,
                           int64_t max_header_bytes, int64_t max_body_bytes) {
  if (ec == http::error::header_limit) {
    return {431, absl::StrCat("request header fields are over the limit of ", max_header_bytes, " bytes")};
  }
  if (ec == http::error::body_limit) {
    if (content_length.has_value()) {
      return {413, absl::StrCat("request body of ", *content_length, " bytes is over the limit of ", max_body_bytes,
                                " bytes")};
    }
    return {413, absl::StrCat("chunked request body is over the limit of ", max_body_bytes, " bytes")};
  }
  // Everything else is a malformed request: bad request line, bad Content-Length (negative, not an integer,
  // conflicting), Content-Length together with chunked, a bad chunk, ... Beast's messages name the part.
  return {400, absl::StrCat("malformed request: ", ec.message())};
}

}  // namespace sluice
