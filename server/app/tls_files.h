// Checks the server's TLS certificate and key before anything else starts, so a bad file is reported at once,
// naming the file and what is wrong, instead of after every model has loaded as "cannot listen".
// Thread-safety: pure function (OpenSSL's PEM readers are thread-safe).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace sluice {

// OK when `cert_path` holds a PEM certificate (chain), `key_path` a PEM private key, and the key matches the
// certificate. InvalidArgument otherwise, naming the file.
absl::Status CheckTlsFiles(const std::string& cert_path, const std::string& key_path);

}  // namespace sluice
