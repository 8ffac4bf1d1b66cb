#include "loadtest/core/load_client.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "backend/base/sync.h"

namespace sluice::loadtest {

Outcome LoadClient::SendAndWait(Call call, std::chrono::system_clock::time_point deadline) {
  Mutex mu;
  CondVar answered;
  bool done = false;  // guarded by mu
  Outcome result;
  Send(std::move(call), deadline, [&](const Outcome& outcome) {
    MutexLock lock(&mu);
    result = outcome;
    done = true;
    answered.Signal();  // under mu: this frame (mu, answered) may end as soon as mu is released
  });
  MutexLock lock(&mu);
  while (!done) answered.Wait(&mu);
  return result;
}

std::string GrpcCodeName(int code) {
  static const char* const kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                       "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                       "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  if (code == kClientDroppedCode) return "CLIENT_DROPPED";
  if (code == kUsageMismatchCode) return "USAGE_MISMATCH";
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return absl::StrCat("CODE_", code);
}

}  // namespace sluice::loadtest
