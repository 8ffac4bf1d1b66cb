#include "server/voice/decode_executor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/base/tsan_handoff.h"

namespace sluice::voice {

// No slot reserved for external threads: work is only ever enqueued (gRPC threads never join the arena, so they
// never run a decode nor wait for one).
DecodeExecutor::DecodeExecutor(const DecodeLimits& limits)
    : limits_(limits), arena_(limits.concurrency, /*reserved_for_masters=*/0) {}

DecodeExecutor::~DecodeExecutor() noexcept { WaitIdle(); }

absl::StatusOr<DecodeTicket> DecodeExecutor::Submit(int64_t bytes, std::function<void()> work) {
  DecodeTicket ticket;
  {
    MutexLock lock(&mu_);
    const int slots = limits_.concurrency + limits_.max_waiting;
    if (admitted_ >= slots) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "too many audio decodes in progress (", admitted_, ": ", limits_.concurrency, " running and ",
          limits_.max_waiting, " waiting, voice.decode_threads + voice.max_waiting_decodes); retry later"));
    }
    if (admitted_ > 0 && bytes_ + bytes > limits_.max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "audio decodes in progress hold ", bytes_, " bytes; this one needs about ", bytes,
          " more, past voice.max_decode_bytes (", limits_.max_bytes, "); retry later"));
    }
    ++admitted_;
    bytes_ += bytes;
    ticket = ++last_ticket_;
    // The work itself is handed to the worker through waiting_, under mu_ (which TSan sees).
    waiting_.emplace(ticket, Waiting{.bytes = bytes, .work = std::move(work)});
  }
  tbb::task_handle task = group_.defer([this] {
    SLUICE_TSAN_ACQUIRE(this);
    RunOldest();
  });
  // oneTBB runs an enqueued task after enqueue was called (its queue orders the two), invisibly to TSan (Debian's
  // libtbb is not instrumented): the task's first touch of this executor is ordered after the submitter's.
  SLUICE_TSAN_RELEASE(this);
  arena_.enqueue(std::move(task));
  return ticket;
}

bool DecodeExecutor::Withdraw(DecodeTicket ticket) {
  std::function<void()> work;  // destroyed after the lock: it may own the call's audio
  {
    MutexLock lock(&mu_);
    auto it = waiting_.find(ticket);
    if (it == waiting_.end()) return false;
    work = std::move(it->second.work);
    --admitted_;
    bytes_ -= it->second.bytes;
    waiting_.erase(it);
  }
  return true;
}

void DecodeExecutor::RunOldest() {
  Waiting next;
  {
    MutexLock lock(&mu_);
    if (waiting_.empty()) return;  // this task's work was withdrawn (or an older task's, and it took this one's)
    next = std::move(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
  }
  // The work reports its own failures; nothing may escape into oneTBB, which would rethrow it at WaitIdle.
  try {
    next.work();
  } catch (...) {
  }
  next.work = nullptr;  // what the work holds goes before its slot is given back
  Done(next.bytes);
}

void DecodeExecutor::Done(int64_t bytes) {
  MutexLock lock(&mu_);
  --admitted_;
  bytes_ -= bytes;
}

void DecodeExecutor::WaitIdle() {
  arena_.execute([this] { group_.wait(); });
  // group_.wait's ordering after the works is oneTBB's (invisible to TSan); each work's last touch of anything
  // (Done) is under mu_, so taking it once orders all of them before what the caller does next (e.g. destroy).
  MutexLock lock(&mu_);
}

int DecodeExecutor::admitted() const {
  MutexLock lock(&mu_);
  return admitted_;
}

}  // namespace sluice::voice
