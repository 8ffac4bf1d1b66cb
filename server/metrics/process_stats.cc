#include "server/metrics/process_stats.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace sluice {

ProcessStats ReadProcessStats() {
  ProcessStats stats;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    fields >> key >> kib;
    if (key == "VmRSS:") stats.resident_bytes = kib * 1024;
    if (key == "VmHWM:") stats.peak_resident_bytes = kib * 1024;
  }
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces, so skip to the last ')'); utime and stime are the
  // 12th and 13th of those.
  const size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 1; i <= 13 && rest >> field; ++i) {
      if (i == 12) utime = std::stod(field);
      if (i == 13) stime = std::stod(field);
    }
    stats.cpu_seconds = (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return stats;
}

}  // namespace sluice
