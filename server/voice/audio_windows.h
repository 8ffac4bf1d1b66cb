// Long audio -> overlapping windows that each fit a compiled length bucket, and the stitching of the windows'
// output frames back into the one frame sequence the model would have produced for the whole audio.
//
// Each window keeps only the centre of its output (frames near a window edge lack context): `overlap` worth of
// frames is dropped on each side, except at the start of the first window and the end of the last. Window
// starts and cut points are multiples of samples_per_frame, so a window's frame j is global frame
// start_sample / samples_per_frame + j, and the kept ranges tile [0, total frames) with no gap or overlap.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::voice {

struct WindowPlanOptions {
  int64_t window_samples = 0;     // audio per window (the largest bucket, say); a multiple of samples_per_frame
  int64_t overlap_samples = 0;    // context dropped on each inner side; a multiple of samples_per_frame
  int64_t samples_per_frame = 0;  // the model's input samples per output frame (640 for asr_ctc)
  // The model's output frame count for n input samples (asr_ctc: ceil(ceil(ceil(n/160)/2)/2)). It must be
  // shift-consistent: start/samples_per_frame + frames(n - start) == frames(n) for frame-aligned starts.
  std::function<int64_t(int64_t)> frames_for_samples;
};

struct AudioWindow {
  int64_t start_sample = 0;  // the audio this window runs on: [start_sample, start_sample + num_samples)
  int64_t num_samples = 0;   // window_samples, except the last window, which may be shorter
  int64_t num_frames = 0;    // frames_for_samples(num_samples): this window's own output frames
  int64_t keep_begin_frame = 0;    // [keep_begin_frame, keep_end_frame): this window's own frames to keep
  int64_t keep_end_frame = 0;
  int64_t global_begin_frame = 0;  // where the kept frames go in the stitched sequence
};

// OK, or InvalidArgument naming the bad field: window_samples <= 0, overlap_samples < 0,
// 2 * overlap_samples >= window_samples, samples_per_frame <= 0, window or overlap not a multiple of
// samples_per_frame, frames_for_samples missing.
absl::Status ValidateWindowPlanOptions(const WindowPlanOptions& options);

// Audio of at most window_samples: one window over all of it, keeping all its frames. Longer audio: windows of
// window_samples starting every window_samples - 2 * overlap_samples samples until one reaches the end; that last
// window is cut short at the end of the audio (rather than moved earlier, which would break frame alignment) and
// so holds more than 2 * overlap_samples samples and runs in a smaller bucket. No audio: no windows.
// InvalidArgument for bad options or total_samples < 0, or when frames_for_samples disagrees with the plan (a
// window would keep frames it does not have, or the kept frames would not add up to frames_for_samples(total)).
absl::StatusOr<std::vector<AudioWindow>> PlanWindows(int64_t total_samples, const WindowPlanOptions& options);

// The stitched sequence's frame count: the sum of the windows' kept frames.
int64_t StitchedFrames(const std::vector<AudioWindow>& plan);

// Copies each window's kept frames into one row-major [StitchedFrames(plan), num_classes] sequence.
// window_log_probs[i] is window i's output, row-major [plan[i].num_frames, num_classes].
// InvalidArgument if num_classes <= 0, the window counts differ, a window's output has the wrong size (too short
// to hold its kept frames, or not its num_frames rows), or the plan's kept ranges do not tile.
absl::StatusOr<std::vector<float>> Stitch(const std::vector<AudioWindow>& plan,
                                          const std::vector<std::vector<float>>& window_log_probs,
                                          int64_t num_classes);

}  // namespace sluice::voice
