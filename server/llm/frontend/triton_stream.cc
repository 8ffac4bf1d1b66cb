#include "server/llm/frontend/triton_stream.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "backend/base/sync.h"
#include "backend/base/tsan_handoff.h"
#include "server/llm/frontend/triton_stream_codec.h"

namespace sluice {
namespace {

// One response waiting for the stream, encoded when it is written.
struct Outgoing {
  uint64_t key = 0;  // the request on this stream (0: a refusal, never merged)
  std::string model;
  std::string id;
  std::optional<std::string> text;  // text_output; absent: no outputs
  bool final = false;
  absl::Status error;  // not OK: an error response

  void Encode(inference::ModelStreamInferResponse& out) const {
    if (!error.ok()) return EncodeTritonError(model, id, error, out);
    EncodeTritonText(model, id, text ? &*text : nullptr, final, out);
  }
};

class Stream final : public TritonStreamReactor {
 public:
  explicit Stream(ModelHub* hub) : hub_(hub) {}

  void Begin(const grpc::Status& auth) {
    HandOver();
    if (!auth.ok()) return Finish(auth);
    StartRead(&request_);
  }

  // The client has left more than kTritonStreamMaxQueuedResponses responses unread: the stream ends with
  // RESOURCE_EXHAUSTED (once its running requests, cancelled now, are done), its queue dropped.
  std::vector<GenerationHandle> OverflowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    overflowed_ = true;
    end_status_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                               absl::StrCat("the client left more than ", kTritonStreamMaxQueuedResponses,
                                            " responses of this stream unread; the stream is ended"));
    return BreakLocked();
  }

  // Queues a response of request `key` (merging text into its queued one) and starts a write when none is in
  // flight. False when the stream is broken (the request should stop).
  bool Push(Outgoing out) {
    std::vector<GenerationHandle> cancel;
    bool write = false;
    bool overflowed = false;
    {
      MutexLock lock(&mu_);
      if (broken_) return false;
      QueueLocked(std::move(out));
      if (queue_.size() > kTritonStreamMaxQueuedResponses) {
        overflowed = true;
        cancel = OverflowLocked();
      } else if (!writing_) {
        write = TakeNextLocked();
      }
    }
    // The stream cannot finish here: a caller is in OnReadDone (no half-close yet) or a sink whose call is still
    // in calls_. So the cancellations (which may run CallDone on this thread) leave `this` alive.
    for (const GenerationHandle& handle : cancel) handle.Cancel();
    if (write) {
      HandOver();
      StartWrite(&current_);
    }
    return !overflowed;
  }

  // Request `key` is done: its last response (if any) is queued and the stream may finish.
  void CallDone(uint64_t key, std::optional<Outgoing> last) {
    bool write = false;
    bool finish = false;
    grpc::Status end;
    {
      MutexLock lock(&mu_);
      calls_.erase(key);
      if (last && !broken_) QueueLocked(*std::move(last));
      if (!writing_) write = TakeNextLocked();
      if (!write) finish = ShouldFinishLocked(&end);
    }
    if (write) {
      HandOver();
      StartWrite(&current_);
    }
    if (finish) {
      HandOver();
      Finish(end);
    }
  }

  bool broken() {
    MutexLock lock(&mu_);
    return broken_;
  }

  void OnReadDone(bool ok) override {
    SLUICE_TSAN_ACQUIRE(this);  // gRPC runs a reaction after the StartRead/StartWrite that asked for it
    if (!ok) {  // the client half-closed (or the stream broke): finish once every request is answered
      bool finish = false;
      grpc::Status end;
      {
        MutexLock lock(&mu_);
        reads_done_ = true;
        finish = ShouldFinishLocked(&end);
      }
      if (finish) {
        HandOver();
        Finish(end);
      }
      return;
    }
    HandleRequest();
    // Give back what the request held (a long text_input) now, not when the next read overwrites it.
    request_ = inference::ModelInferRequest();
    bool overflowed = false;
    bool finish = false;
    grpc::Status end;
    {
      MutexLock lock(&mu_);
      overflowed = overflowed_;
      if (overflowed) {  // no more reads: the stream ends once its running requests are done
        reads_done_ = true;
        finish = ShouldFinishLocked(&end);
      }
    }
    if (finish) {
      HandOver();
      return Finish(end);
    }
    if (!overflowed) {
      HandOver();
      StartRead(&request_);
    }
  }

  void OnWriteDone(bool ok) override {
    SLUICE_TSAN_ACQUIRE(this);  // gRPC runs a reaction after the StartRead/StartWrite that asked for it
    bool write = false;
    bool finish = false;
    grpc::Status end;
    std::vector<GenerationHandle> cancel;
    {
      MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) cancel = BreakLocked();
      write = TakeNextLocked();
      if (!write) finish = ShouldFinishLocked(&end);
    }
    for (const GenerationHandle& handle : cancel) handle.Cancel();  // may run CallDone here: no lock held
    if (write) {
      HandOver();
      StartWrite(&current_);
    }
    if (finish) {
      HandOver();
      Finish(end);
    }
  }

  void OnCancel() override {
    SLUICE_TSAN_ACQUIRE(this);  // gRPC runs OnCancel after the handler returned the reactor (built, then Begin)
    std::vector<GenerationHandle> cancel;
    {
      MutexLock lock(&mu_);
      cancel = BreakLocked();
    }
    for (const GenerationHandle& handle : cancel) handle.Cancel();
    HandOver();  // OnDone may come next, on another thread
  }

  void OnDone() override {
    // gRPC calls OnDone after Finish and after every other reaction has returned (ServerBidiReactor's contract):
    // what they and the sinks did (each released `this` before its gRPC operation) happens before the delete.
    SLUICE_TSAN_ACQUIRE(this);
    delete this;
  }

 private:
  // Before each StartRead/StartWrite/Finish: gRPC's next reaction (or OnDone) on another thread sees what this
  // thread wrote (gRPC orders them through its own, uninstrumented locks; see backend/base/tsan_handoff.h).
  void HandOver() { SLUICE_TSAN_RELEASE(this); }
  void HandleRequest();

  // The stream can no longer deliver: drop what is queued and return the handles of the running requests.
  std::vector<GenerationHandle> BreakLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    broken_ = true;
    queue_.clear();
    std::vector<GenerationHandle> handles;
    for (const auto& [key, handle] : calls_) handles.push_back(handle);
    return handles;
  }

  void QueueLocked(Outgoing out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (out.key != 0 && out.text && out.error.ok()) {
      for (auto it = queue_.rbegin(); it != queue_.rend(); ++it) {
        if (it->key != out.key) continue;
        if (it->text && it->error.ok() && !it->final) {  // merge into the request's queued text
          *it->text += *out.text;
          it->final = out.final;
          return;
        }
        break;
      }
    }
    queue_.push_back(std::move(out));
  }

  // Encodes the next queued response into current_ and marks a write in flight.
  bool TakeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (broken_ || queue_.empty()) return false;
    queue_.front().Encode(current_);
    queue_.pop_front();
    writing_ = true;
    return true;
  }

  // An overflowed stream does not wait for the client's half-close (its read is not renewed, see OnReadDone),
  // only for its reads to stop and its requests and the write in flight to be done.
  // Sets *end to the status to finish with.
  bool ShouldFinishLocked(grpc::Status* end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !reads_done_ || !calls_.empty() || writing_ || (!queue_.empty() && !broken_)) return false;
    finished_ = true;
    *end = end_status_;
    return true;
  }

  ModelHub* const hub_;
  inference::ModelInferRequest request_;            // the read in flight (reads are sequential)
  inference::ModelStreamInferResponse current_;     // the write in flight (set under mu_ before StartWrite)
  uint64_t next_key_ = 1;                           // used by OnReadDone only (reads are sequential)

  Mutex mu_;
  std::map<uint64_t, GenerationHandle> calls_ ABSL_GUARDED_BY(mu_);  // running requests (empty handle: accepting)
  std::deque<Outgoing> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;    // cancelled or a write failed
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was (being) called
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);  // how the stream finishes: OK, or the overflow
};

// One request's sink: streamed deltas become responses at once; a non-streamed request collects its text.
class StreamCallSink final : public GenerationSink {
 public:
  StreamCallSink(Stream* stream, uint64_t key, const TritonGenerateRequest& request)
      : stream_(stream),
        key_(key),
        model_(request.model),
        id_(request.id),
        streamed_(request.stream),
        empty_final_(request.empty_final) {}

  bool OnDelta(const GenerationDelta& delta) override {
    if (!streamed_) {
      text_ += delta.text;  // the engine calls one at a time: no lock needed
      return !stream_->broken();
    }
    if (delta.text.empty()) return !stream_->broken();
    return stream_->Push(Response(delta.text, /*final=*/false));
  }

  void OnDone(const GenerationSummary& summary) override {
    std::optional<Outgoing> last;
    if (summary.status.ok()) {
      if (!streamed_) {
        last = Response(std::move(text_), /*final=*/true);
      } else {
        last = Response(empty_final_ ? std::nullopt : std::optional<std::string>(""), /*final=*/true);
      }
    } else if (!absl::IsCancelled(summary.status)) {
      last = Outgoing{key_, model_, id_, std::nullopt, true, summary.status};
    }
    stream_->CallDone(key_, std::move(last));  // the stream may be finished (and deleted) from here on
  }

 private:
  Outgoing Response(std::optional<std::string> text, bool final) const {
    return Outgoing{key_, model_, id_, std::move(text), final, absl::OkStatus()};
  }

  Stream* const stream_;  // outlives this sink's calls: the stream finishes only after CallDone
  const uint64_t key_;
  const std::string model_;
  const std::string id_;
  const bool streamed_;
  const bool empty_final_;
  std::string text_;
};

void Stream::HandleRequest() {
  absl::StatusOr<TritonGenerateRequest> decoded = DecodeTritonGenerate(request_);
  absl::StatusOr<GenerationModel*> model = hub_->FindGeneration(request_.model_name());
  if (!model.ok()) {  // no model to count or answer it: the stream answers
    Push(Outgoing{0, request_.model_name(), request_.id(), std::nullopt, true, model.status()});
    return;
  }
  TritonGenerateRequest wire;  // what the sink needs of a request that did not decode: its model and id
  wire.model = request_.model_name();
  wire.id = request_.id();
  const TritonGenerateRequest& head = decoded.ok() ? *decoded : wire;
  const uint64_t key = next_key_++;
  {
    MutexLock lock(&mu_);
    if (broken_) return;
    calls_.emplace(key, GenerationHandle());
  }
  auto sink = std::make_shared<StreamCallSink>(this, key, head);
  absl::StatusOr<GenerationCall> call =
      decoded.ok() ? absl::StatusOr<GenerationCall>(std::move(decoded->call)) : decoded.status();
  // One path from here: every outcome, a refusal included, comes back through the sink (CallDone).
  GenerationHandle handle = (*model)->Generate(std::move(call), sink);
  bool cancel = false;
  {
    MutexLock lock(&mu_);
    auto it = calls_.find(key);
    if (it != calls_.end()) {  // not done already
      it->second = handle;
      cancel = broken_;
    }
  }
  if (cancel) handle.Cancel();
}

}  // namespace

TritonStreamReactor* StartTritonStream(ModelHub* hub, const grpc::Status& auth) {
  auto* stream = new Stream(hub);
  stream->Begin(auth);
  return stream;
}

}  // namespace sluice
