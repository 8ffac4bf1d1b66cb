// Linked only into the ThreadSanitizer build: Debian's oneTBB is not instrumented, so TSan cannot see the
// synchronisation inside tbb::parallel_for and would flag the rows its workers copy. Running TBB with one
// thread keeps parallel_for's code path while every row copy happens on the calling thread, which TSan sees.
#include <tbb/global_control.h>

namespace {
tbb::global_control serial_tbb(tbb::global_control::max_allowed_parallelism, 1);
}  // namespace
