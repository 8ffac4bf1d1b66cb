// This process's resident memory (now and peak) and CPU time, read from /proc (Linux).
// Thread-safety: stateless; safe from any thread.
#pragma once

#include <cstdint>

namespace sluice {

struct ProcessStats {
  int64_t resident_bytes = 0;       // VmRSS
  int64_t peak_resident_bytes = 0;  // VmHWM
  double cpu_seconds = 0;           // user + system
};

// Zeros where /proc cannot be read.
ProcessStats ReadProcessStats();

}  // namespace sluice
