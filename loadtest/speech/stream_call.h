// One StreamingRecognize call of the load generator (--api riva-streaming), a gRPC callback bidi reactor: it
// writes the streaming_config (LINEAR_PCM at the model's rate, interim_results on), then the recording's 16-bit
// PCM in chunks — at real time (chunk k when begin(k) / rate seconds have passed since chunk 0; a chunk that
// gRPC flow control holds back goes as soon as the write before it is done) or back to back — then WritesDone;
// and reads every response. It measures, against its own send times:
//  - per chunk: the first response whose audio_processed reaches the chunk's end (interim or final), minus the
//    chunk's send time;
//  - time to first result: the first response carrying a result, minus chunk 0's send time;
//  - final latency: the last is_final result received after WritesDone, minus WritesDone.
// Real-time pacing needs a clock outside gRPC's reactions: when the next chunk is not yet due the call asks its
// owner (the stream runner's thread) to call SendDueChunk() at that time, and holds the call open meanwhile.
// Lifetime: the owner creates it, calls Start(), and deletes it only after `on_done` ran (OnDone has returned
// from everything but that call).
// Thread-safety: gRPC reactions and the owner's SendDueChunk/Cancel serialise on mu_; no gRPC operation and no
// owner callback is called under it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backend/base/sync.h"
#include "loadtest/speech/speech_audio.h"
#include "riva/proto/riva_asr.grpc.pb.h"

namespace sluice::loadtest {

// What one stream measured. Times are seconds since the run's start.
struct StreamOutcome {
  int code = 0;  // grpc::StatusCode of the call
  std::string message;  // the call's error message (code != 0)
  double start_s = 0, end_s = 0;
  int64_t chunks_sent = 0;
  int64_t chunks_unanswered = 0;           // sent, but no result reached their end
  std::vector<double> chunk_latencies_ms;  // one per answered chunk, in order
  std::optional<double> first_result_ms;
  std::optional<double> final_latency_ms;
  std::string transcript;  // the final results' transcripts joined by spaces (when kept)
};

class StreamCall final
    : public grpc::ClientBidiReactor<nvidia::riva::asr::StreamingRecognizeRequest,
                                     nvidia::riva::asr::StreamingRecognizeResponse> {
 public:
  using Clock = std::chrono::steady_clock;
  struct Setup {
    std::string model;
    int sample_rate = 16000;
    std::string pcm;  // the whole recording, 16-bit little-endian
    double chunk_ms = 100;
    bool realtime = true;
    bool keep_transcript = false;
    std::string bearer_token;
    std::chrono::system_clock::time_point deadline;
    Clock::time_point run_start;
    std::function<void(double due_s)> wake_at;  // call SendDueChunk() at due_s (run seconds)
    std::function<void()> on_done;              // the call has ended; it may be deleted now
  };

  explicit StreamCall(Setup setup);

  void Start(nvidia::riva::asr::RivaSpeechRecognition::Stub* stub);
  // The owner's wake-up for a chunk that was not yet due (any thread but gRPC's reactions).
  void SendDueChunk();
  // Cancels the call (it still ends through OnDone).
  void Cancel();
  // REQUIRES: on_done has run.
  StreamOutcome TakeOutcome();

  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override {}
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  StreamCall(const StreamCall&) = delete;
  StreamCall& operator=(const StreamCall&) = delete;

 private:
  struct SentChunk {
    double end_s;   // the stream position the chunk reaches, in seconds of audio
    double sent_s;  // run seconds
  };
  enum class Step { kNone, kWrite, kWritesDone, kAbandon, kWait };

  double Now() const { return std::chrono::duration<double>(Clock::now() - setup_.run_start).count(); }
  // With no write outstanding: writes the next chunk, WritesDone, or waits for the chunk's time.
  void Advance();

  const Setup setup_;
  const ChunkPlan plan_;
  grpc::ClientContext context_;
  nvidia::riva::asr::StreamingRecognizeRequest request_;    // the one write in flight
  nvidia::riva::asr::StreamingRecognizeResponse response_;  // the one read in flight

  Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_side_closed_ ABSL_GUARDED_BY(mu_) = false;  // WritesDone sent or writing abandoned; hold released
  bool failed_ ABSL_GUARDED_BY(mu_) = false;             // a write failed, the reads ended, or cancelled
  int64_t next_chunk_ ABSL_GUARDED_BY(mu_) = 0;
  double first_chunk_s_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<double> writes_done_s_ ABSL_GUARDED_BY(mu_);
  std::deque<SentChunk> unanswered_ ABSL_GUARDED_BY(mu_);
  StreamOutcome outcome_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::loadtest
