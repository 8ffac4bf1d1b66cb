// Writing a report to its file (--json, --plot, the --dry-run plan, sluice-advisor --json), with the errors every
// writer gives alike.
// Thread-safety: a free function.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace sluice::loadtest {

// Writes `text` as it is to `path` (replacing it): PermissionDenied when it cannot be opened, DataLoss when writing
// fails.
absl::Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace sluice::loadtest
