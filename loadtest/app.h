// sluice-loadtest's top level: asks the server about the models, optionally verifies them against their
// reference sets, runs the load (or a sweep) over KServe v2 or Riva's speech API, gathers the server's own
// figures and the cost, and writes the table, the JSON report and the SVG plot; --dry-run stops after asking
// and prints the traffic's padding plan.
// Exit codes: 0 done (and every check passed), 1 an SLO verdict, a sweep or --verify failed, 2 bad arguments or
// config files, 3 the server could not be used (also: a load in which no measured request succeeded).
// The API is chosen once: app.cc makes its ApiDriver (core/api_driver.h) and asks it at every API-specific step.
// Thread-safety: RunApp blocks its calling thread.
#pragma once

#include "loadtest/app_options.h"

namespace sluice::loadtest {

inline constexpr int kExitOk = 0, kExitCheckFailed = 1, kExitUsage = 2, kExitServer = 3;

int RunApp(AppOptions options);

}  // namespace sluice::loadtest
