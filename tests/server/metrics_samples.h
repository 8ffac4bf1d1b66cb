// Test helper: the samples of a Prometheus text scrape keyed exactly as written ("name{label="v",...}"), so a test
// can assert one series to the exact value. Label order is the serializer's (prometheus-cpp sorts them).
#pragma once

#include <map>
#include <sstream>
#include <string>

namespace sluice::testing {

inline std::map<std::string, double> ParseSamples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

}  // namespace sluice::testing
