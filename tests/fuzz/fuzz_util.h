// Shared by the libFuzzer targets in tests/fuzz/: a check that aborts with its condition (so libFuzzer records the
// input as a crash), and a per-process scratch file for parsers whose entry point takes a path.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

// Aborts (a crash libFuzzer keeps) when `condition` is false, printing it and `detail` (a std::string).
#define FUZZ_CHECK(condition, detail)                                                                    \
  do {                                                                                                   \
    if (!(condition)) {                                                                                  \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", __FILE__, __LINE__, #condition,         \
                   std::string(detail).c_str());                                                         \
      std::abort();                                                                                      \
    }                                                                                                    \
  } while (0)

namespace sluice::fuzz {

// A directory made on first use, removed when the process exits normally.
inline const std::string& ScratchDir() {
  // Never destroyed: the exit handler below runs after static destructors of objects constructed later.
  static const std::string& dir = *new std::string([] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/sluice-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    std::atexit([] { std::filesystem::remove_all(ScratchDir()); });
    return pattern;
  }());
  return dir;
}

// Writes `data` to ScratchDir()/<name> and returns its path.
inline std::string WriteScratchFile(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = ScratchDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) std::abort();
  return path;
}

}  // namespace sluice::fuzz
