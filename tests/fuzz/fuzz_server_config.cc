// Fuzzes the server config YAML (backend/base/server_config.h): LoadServerConfig takes a path, so each input is
// written to a scratch file (fuzz_util.h) next to a valid pricing.yaml (preset `fuzz.large`, for `cost:` presets)
// and empty cert.pem/key.pem (for `tls:`), which relative paths in the input may name.
// Asserts beyond "no crash, no ASan/UBSan report": the documented ranges of a config that loads: addresses end in
// a port 0..65535; every limit within the bounds server_config.cc states; model_repository and TLS paths absolute;
// the bearer token non-empty without whitespace; drain_grace_seconds in [0, 3600]; a cost with a positive finite
// hourly price and accelerators >= 1 (after the conversion to the field's type).
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "backend/base/server_config.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice::fuzz {
namespace {

constexpr char kPricing[] =
    "presets:\n  fuzz.large: {hourly_usd: 1.5, accelerators: 2, unit: gpu, source: \"fuzz\"}\n";

void WriteNeighbours() {
  static const bool written = [] {
    WriteScratchFile(reinterpret_cast<const uint8_t*>(kPricing), sizeof(kPricing) - 1, "pricing.yaml");
    WriteScratchFile(nullptr, 0, "cert.pem");
    WriteScratchFile(nullptr, 0, "key.pem");
    return true;
  }();
  (void)written;
}

void CheckAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  FUZZ_CHECK(colon != std::string::npos && colon > 0, address);
  const std::string port = address.substr(colon + 1);
  FUZZ_CHECK(!port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoi(port) <= 65535,
             address);
}

void CheckRange(int64_t value, int64_t min, int64_t max, const char* what) {
  FUZZ_CHECK(value >= min && value <= max, absl::StrCat(what, " ", value));
}

void CheckConfig(const ServerConfig& c) {
  CheckAddress(c.grpc_address);
  CheckAddress(c.http_address);
  CheckRange(c.http.threads, 1, 256, "http.threads");
  CheckRange(c.http.max_connections, 1, 1000000, "http.max_connections");
  CheckRange(c.http.max_header_bytes, 1024, 1 << 20, "http.max_header_bytes");
  CheckRange(c.http.header_timeout_ms, 100, 3600000, "http.header_timeout_ms");
  CheckRange(c.http.body_timeout_ms, 100, 3600000, "http.body_timeout_ms");
  CheckRange(c.http.idle_timeout_ms, 100, 3600000, "http.idle_timeout_ms");
  CheckRange(c.max_message_bytes, 1024, int64_t{2047} << 20, "max_message_bytes");
  CheckRange(c.keepalive_time_ms, 1000, 86400000, "keepalive_time_ms");
  CheckRange(c.keepalive_timeout_ms, 100, 3600000, "keepalive_timeout_ms");
  FUZZ_CHECK(!c.model_repository.empty() && c.model_repository[0] == '/', c.model_repository);
  FUZZ_CHECK(c.tls_cert_path.empty() == c.tls_key_path.empty(), "TLS needs both files");
  if (!c.tls_cert_path.empty()) FUZZ_CHECK(c.tls_cert_path[0] == '/' && c.tls_key_path[0] == '/', "TLS paths");
  if (!c.bearer_token.empty()) {
    FUZZ_CHECK(c.bearer_token.find_first_of(" \t\r\n") == std::string::npos, "bearer token");
  }
  FUZZ_CHECK(c.drain_grace_seconds >= 0 && c.drain_grace_seconds <= 3600, "drain_grace_seconds");
  if (c.cost) {
    FUZZ_CHECK(std::isfinite(c.cost->hourly_usd) && c.cost->hourly_usd > 0,
               absl::StrCat("hourly_usd ", c.cost->hourly_usd));
    FUZZ_CHECK(c.cost->accelerators >= 1, absl::StrCat("accelerators ", c.cost->accelerators));
  }
}

}  // namespace
}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  if (size > 64 * 1024) return 0;  // configs are small; yaml-cpp is slow on huge inputs
  fuzz::WriteNeighbours();
  const std::string path = fuzz::WriteScratchFile(data, size, "server.yaml");
  absl::StatusOr<ServerConfig> config = LoadServerConfig(path);
  if (config.ok()) fuzz::CheckConfig(*config);
  return 0;
}
