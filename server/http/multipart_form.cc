#include "server/http/multipart_form.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

constexpr std::string_view kCrlf = "\r\n";
constexpr size_t kMaxBoundary = 70;  // RFC 2046 section 5.1.1

// Debian's absl::string_view is not std::string_view: StrCat takes this one.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsWhitespace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsWhitespace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsWhitespace(s.back())) s.remove_suffix(1);
  return s;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(a[i])) != absl::ascii_tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// RFC 7230 tchar: what a parameter name or an unquoted value may hold.
bool IsTokenChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// RFC 2046 bchars (a space is allowed, but not last).
bool IsBoundaryChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  return std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

absl::Status Invalid(std::string_view what, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(A(what), ": ", A(message)));
}

struct Parameter {
  std::string name;  // lower case
  std::string value;
};

// `; name=value` pairs after a media type or disposition type; values are tokens or quoted strings (backslash
// escapes). `what` names the header in errors.
absl::StatusOr<std::vector<Parameter>> ParseParameters(std::string_view rest, std::string_view what) {
  std::vector<Parameter> parameters;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < rest.size() && IsWhitespace(rest[i])) ++i;
  };
  while (true) {
    skip_space();
    if (i == rest.size()) return parameters;
    if (rest[i] != ';') return Invalid(what, absl::StrCat("expected ';' before a parameter at byte ", i));
    ++i;
    skip_space();
    if (i == rest.size()) return parameters;  // a trailing ';' is harmless
    const size_t name_start = i;
    while (i < rest.size() && IsTokenChar(rest[i])) ++i;
    if (i == name_start) return Invalid(what, absl::StrCat("a parameter has no name at byte ", i));
    Parameter& p = parameters.emplace_back();
    p.name = absl::AsciiStrToLower(A(rest.substr(name_start, i - name_start)));
    skip_space();
    if (i == rest.size() || rest[i] != '=') return Invalid(what, absl::StrCat("parameter '", p.name, "' has no value"));
    ++i;
    skip_space();
    if (i < rest.size() && rest[i] == '"') {
      ++i;
      bool closed = false;
      while (i < rest.size()) {
        const char c = rest[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (i == rest.size()) break;
          p.value.push_back(rest[i++]);
        } else {
          p.value.push_back(c);
        }
      }
      if (!closed) return Invalid(what, absl::StrCat("parameter '", p.name, "': unterminated quoted string"));
    } else {
      const size_t value_start = i;
      while (i < rest.size() && IsTokenChar(rest[i])) ++i;
      if (i == value_start) return Invalid(what, absl::StrCat("parameter '", p.name, "' has an empty value"));
      p.value = std::string(rest.substr(value_start, i - value_start));
    }
  }
}

const Parameter* FindParameter(const std::vector<Parameter>& parameters, std::string_view name) {
  for (const Parameter& p : parameters) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// The part's name for errors: "part 2" or "part 2 ('file')".
std::string PartName(size_t index, const MultipartPart& part) {
  if (part.name.empty()) return absl::StrCat("multipart part ", index);
  return absl::StrCat("multipart part ", index, " ('", part.name, "')");
}

// One header field of a part into `part`. `seen_disposition` catches a second Content-Disposition.
absl::Status ParsePartHeader(std::string_view line, size_t index, MultipartPart& part, bool& seen_disposition) {
  const std::string where = absl::StrCat("multipart part ", index);
  if (IsWhitespace(line.front())) return Invalid(where, "folded header lines are not allowed (RFC 7230 obs-fold)");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return Invalid(where, "a header line has no field name and ':'");
  }
  const std::string_view name = line.substr(0, colon);
  for (char c : name) {
    if (!IsTokenChar(c)) return Invalid(where, "a header field name holds a character that is not allowed");
  }
  const std::string_view value = Trim(line.substr(colon + 1));
  if (EqualsNoCase(name, "Content-Disposition")) {
    if (seen_disposition) return Invalid(where, "more than one Content-Disposition");
    seen_disposition = true;
    const size_t semicolon = value.find(';');
    const std::string_view type = Trim(value.substr(0, semicolon));
    if (!EqualsNoCase(type, "form-data")) {
      return Invalid(where, absl::StrCat("Content-Disposition must be form-data, not '", A(type), "'"));
    }
    absl::StatusOr<std::vector<Parameter>> parameters =
        ParseParameters(semicolon == std::string_view::npos ? std::string_view() : value.substr(semicolon),
                        absl::StrCat(where, " Content-Disposition"));
    if (!parameters.ok()) return parameters.status();
    const Parameter* field = FindParameter(*parameters, "name");
    if (field == nullptr) return Invalid(where, "Content-Disposition has no name parameter");
    part.name = field->value;
    if (const Parameter* filename = FindParameter(*parameters, "filename")) part.filename = filename->value;
    return absl::OkStatus();
  }
  if (EqualsNoCase(name, "Content-Type")) {
    part.content_type = std::string(value);
    if (value.size() >= 10 && EqualsNoCase(value.substr(0, 10), "multipart/")) {
      return Invalid(where, absl::StrCat("nested multipart parts ('", A(value), "') are not supported"));
    }
    return absl::OkStatus();
  }
  if (EqualsNoCase(name, "Content-Transfer-Encoding")) {
    if (!EqualsNoCase(value, "binary") && !EqualsNoCase(value, "8bit") && !EqualsNoCase(value, "7bit")) {
      return Invalid(where, absl::StrCat("Content-Transfer-Encoding '", A(value),
                                         "' is not supported (send the bytes as they are: binary)"));
    }
  }
  return absl::OkStatus();  // other fields carry nothing a form field needs
}

// The header block of part `index` from body[pos], up to and including its blank line; `pos` moves past it.
absl::Status ParsePartHeaders(std::string_view body, size_t& pos, size_t index, const MultipartLimits& limits,
                              MultipartPart& part) {
  const std::string where = absl::StrCat("multipart part ", index);
  const size_t start = pos;
  const size_t block_end = std::min(body.size(), start + limits.max_part_header_bytes);
  bool seen_disposition = false;
  size_t lines = 0;
  while (true) {
    const size_t eol = body.substr(0, block_end).find(kCrlf, pos);
    if (eol == std::string_view::npos) {
      if (block_end == body.size() && body.size() - start < limits.max_part_header_bytes) {
        return Invalid(where, "the body ends inside the part's headers");
      }
      return Invalid(where, absl::StrCat("the part's headers are longer than ", limits.max_part_header_bytes,
                                         " bytes"));
    }
    const std::string_view line = body.substr(pos, eol - pos);
    pos = eol + kCrlf.size();
    if (line.empty()) break;
    if (++lines > limits.max_part_header_lines) {
      return Invalid(where, absl::StrCat("more than ", limits.max_part_header_lines, " header lines"));
    }
    for (char c : line) {
      if (c == '\0' || c == '\r' || c == '\n') return Invalid(where, "a header line holds NUL, CR or LF");
    }
    if (absl::Status s = ParsePartHeader(line, index, part, seen_disposition); !s.ok()) return s;
  }
  if (!seen_disposition) return Invalid(where, "no Content-Disposition header (every form part needs one)");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> MultipartBoundary(std::string_view content_type) {
  constexpr std::string_view kWhat = "Content-Type";
  const size_t semicolon = content_type.find(';');
  const std::string_view type = Trim(content_type.substr(0, semicolon));
  if (!EqualsNoCase(type, "multipart/form-data")) {
    return Invalid(kWhat, absl::StrCat("expected multipart/form-data, got '", A(type), "'"));
  }
  if (semicolon == std::string_view::npos) return Invalid(kWhat, "multipart/form-data without a boundary parameter");
  absl::StatusOr<std::vector<Parameter>> parameters = ParseParameters(content_type.substr(semicolon), kWhat);
  if (!parameters.ok()) return parameters.status();
  const Parameter* boundary = nullptr;
  for (const Parameter& p : *parameters) {
    if (p.name != "boundary") continue;
    if (boundary != nullptr) return Invalid(kWhat, "more than one boundary parameter");
    boundary = &p;
  }
  if (boundary == nullptr) return Invalid(kWhat, "multipart/form-data without a boundary parameter");
  const std::string& b = boundary->value;
  if (b.empty() || b.size() > kMaxBoundary) {
    return Invalid(kWhat, absl::StrCat("the boundary must be 1 to ", kMaxBoundary, " characters, not ", b.size()));
  }
  for (char c : b) {
    if (!IsBoundaryChar(c)) return Invalid(kWhat, "the boundary holds a character RFC 2046 does not allow");
  }
  if (b.back() == ' ') return Invalid(kWhat, "the boundary must not end with a space");
  return b;
}

absl::StatusOr<MultipartForm> ParseMultipartForm(std::string_view body, std::string_view boundary,
                                                 const MultipartLimits& limits) {
  if (boundary.empty() || boundary.size() > kMaxBoundary) {
    return absl::InvalidArgumentError("multipart body: the boundary must be 1 to 70 characters");
  }
  const std::string delimiter = absl::StrCat("--", A(boundary));
  const std::string inner_delimiter = absl::StrCat(A(kCrlf), delimiter);  // every delimiter but a leading one
  size_t pos;
  if (body.substr(0, delimiter.size()) == delimiter) {
    pos = delimiter.size();
  } else {
    const size_t first = body.find(inner_delimiter);
    if (first == std::string_view::npos) {
      return absl::InvalidArgumentError(
          "multipart body: the boundary the Content-Type declares does not occur in the body");
    }
    pos = first + inner_delimiter.size();
  }
  MultipartForm form;
  while (true) {
    // After a delimiter: "--" closes the body; otherwise optional padding and CRLF start the next part.
    if (body.substr(pos, 2) == "--") return form;
    while (pos < body.size() && IsWhitespace(body[pos])) ++pos;
    if (body.substr(pos, kCrlf.size()) != kCrlf) {
      if (pos >= body.size()) {
        return absl::InvalidArgumentError(
            "multipart body: it ends without the closing boundary (--boundary--): truncated?");
      }
      return absl::InvalidArgumentError(absl::StrCat("multipart body: a boundary delimiter is followed by other "
                                                     "text than '--' or a line end (after part ",
                                                     form.parts.size(), ")"));
    }
    pos += kCrlf.size();
    const size_t index = form.parts.size() + 1;
    if (form.parts.size() == limits.max_parts) {
      return absl::InvalidArgumentError(absl::StrCat("multipart body: more than ", limits.max_parts, " parts"));
    }
    MultipartPart part;
    if (absl::Status s = ParsePartHeaders(body, pos, index, limits, part); !s.ok()) return s;
    const size_t end = body.find(inner_delimiter, pos);
    if (end == std::string_view::npos) {
      return Invalid(PartName(index, part), "the body ends before the part's closing boundary: truncated?");
    }
    part.data = body.substr(pos, end - pos);
    form.parts.push_back(std::move(part));
    pos = end + inner_delimiter.size();
  }
}

}  // namespace sluice
