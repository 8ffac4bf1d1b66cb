#include "loadtest/core/text_file.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace sluice::loadtest {

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  out << text;
  if (!out) return absl::DataLossError(absl::StrCat("writing '", path, "' failed"));
  return absl::OkStatus();
}

}  // namespace sluice::loadtest
