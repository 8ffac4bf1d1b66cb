// Recognize: one whole recording through a speech model. Audio up to the largest bucket runs as one request;
// longer audio is cut into overlapping windows (audio_windows.h) that each run as their own request through the
// model's scheduler — so the windows of one file batch with each other and with other traffic — and whose
// log-probs are stitched (each window's centre kept) and decoded once.
//
// Memory stays bounded for long files: at most kMaxWindowsInFlight windows' audio is copied out at a time, and a
// finished window keeps only its log-probs (frames x classes floats, ~25x smaller than its audio for asr_ctc).
//
// A window that fails (refused on the spot: queue full, deadline passed; or answered with an error) fails the
// recognition with its status; the windows still queued are withdrawn. REQUIRES: the caller has admitted the call
// (ServingState::Admit) and holds the admission until `done`: every window is marked as continuing it, so a drain
// that begins mid-file lets the file finish.
//
// Thread-safety: Start returns a handle whose Cancel may be called from any thread. `done` is called exactly
// once, on the caller's thread (a refusal of the first window) or on a scheduler thread; it must not block.
// A window's completion may run inside model_->Run (a refusal, on the submitting thread) or on a scheduler thread
// before Run has returned its handle, and either may answer the recognition: so the handle is stored only while
// the recognition is unanswered and the window unfinished, and a handle that comes back after the answer is
// cancelled (outside mu_: Cancel may complete the window on this thread).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/base/sync.h"
#include "server/voice/audio_windows.h"
#include "server/voice/ctc_decoder.h"
#include "server/voice/recognizer.h"
#include "server/voice/speech_model.h"

namespace sluice::voice {

struct OfflineResult {
  Transcript transcript;
  int64_t windows = 0;         // model runs this recording took
  double audio_seconds = 0;
};

using OfflineDone = std::function<void(absl::StatusOr<OfflineResult>)>;

class OfflineRecognition final : public RecognitionHandle,
                                 public std::enable_shared_from_this<OfflineRecognition> {
 public:
  // Two full batches of the largest size: enough to fill the accelerator, little enough to bound memory; never
  // more than the model's queue holds (else a lone long file would be refused by its own windows).
  static int MaxWindowsInFlight(const SpeechModel& model);

  // REQUIRES: `model` and `decoder` outlive the recognition; `audio` is mono at model.sample_rate(), non-empty.
  static std::shared_ptr<OfflineRecognition> Start(const SpeechModel* model, const CtcDecoder* decoder,
                                                   std::vector<float> audio, absl::Time deadline, OfflineDone done);
  // Withdraws the windows still queued and answers Cancelled (unless the answer was already given).
  void Cancel() override;

  OfflineRecognition(const SpeechModel* model, const CtcDecoder* decoder, std::vector<float> audio,
                     absl::Time deadline, OfflineDone done);  // public for make_shared; use Start

 private:
  void SubmitMore();
  void OnWindow(size_t index, absl::StatusOr<WindowLogProbs> result);
  // Takes the answer's right: true for exactly one caller.
  bool Claim() ABSL_LOCKS_EXCLUDED(mu_);
  // Answers `status` (once) and withdraws the windows whose handles are stored.
  void Fail(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void Finish();

  const SpeechModel* const model_;
  const CtcDecoder* const decoder_;
  const std::vector<float> audio_;
  const absl::Time deadline_;
  OfflineDone done_;
  std::vector<AudioWindow> plan_;  // set in Start before any window runs, then read-only

  Mutex mu_;
  size_t next_window_ ABSL_GUARDED_BY(mu_) = 0;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  size_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::vector<float>> window_log_probs_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> window_finished_ ABSL_GUARDED_BY(mu_);  // its completion ran (its handle is stale)
  // The running windows' handles, for Fail to withdraw; emptied by the answer (nothing is stored after it).
  std::vector<InferHandle> handles_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::voice
