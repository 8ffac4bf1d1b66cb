#include "server/kserve/bearer_auth.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace sluice {
namespace {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

}  // namespace

absl::Status CheckBearer(std::optional<std::string_view> header, const std::string& token) {
  if (token.empty()) return absl::OkStatus();
  if (!header) return absl::UnauthenticatedError("missing 'Authorization: Bearer <token>'");
  absl::string_view value = absl::StripAsciiWhitespace(absl::string_view(header->data(), header->size()));
  constexpr absl::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() || !absl::StartsWithIgnoreCase(value, kScheme) ||
      !absl::ascii_isspace(static_cast<unsigned char>(value[kScheme.size()]))) {
    return absl::UnauthenticatedError("authorization is not of the form 'Bearer <token>'");
  }
  value = absl::StripLeadingAsciiWhitespace(value.substr(kScheme.size()));
  if (!ConstantTimeEquals(value, token)) return absl::UnauthenticatedError("invalid bearer token");
  return absl::OkStatus();
}

}  // namespace sluice
