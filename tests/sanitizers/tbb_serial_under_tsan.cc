// Linked only into the scheduler's ThreadSanitizer tests (scheduler_clang_tests): oneTBB with one thread, so that
// parallel_for's row copies (scheduler/batch_assembly.cc) run on the calling thread. The service tests
// (services.cmake) run oneTBB's real workers instead: batch_assembly.cc states parallel_for's hand-offs to TSan,
// and tsan_services.supp names oneTBB's own task and join-node accesses.
#include <tbb/global_control.h>

namespace {
tbb::global_control serial_tbb(tbb::global_control::max_allowed_parallelism, 1);
}  // namespace
