#include "server/voice/audio_windows.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::voice {

absl::Status ValidateWindowPlanOptions(const WindowPlanOptions& options) {
  const int64_t window = options.window_samples;
  const int64_t overlap = options.overlap_samples;
  const int64_t per_frame = options.samples_per_frame;
  if (window <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("window plan: window_samples must be > 0, got ", window));
  }
  if (overlap < 0) {
    return absl::InvalidArgumentError(absl::StrCat("window plan: overlap_samples must be >= 0, got ", overlap));
  }
  // 2 * overlap >= window, written so that it cannot overflow.
  if (overlap > (window - 1) / 2) {
    return absl::InvalidArgumentError(absl::StrCat("window plan: 2 * overlap_samples (2 * ", overlap,
                                                   ") must be < window_samples (", window, ")"));
  }
  if (per_frame <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("window plan: samples_per_frame must be > 0, got ", per_frame));
  }
  if (window % per_frame != 0) {
    return absl::InvalidArgumentError(absl::StrCat("window plan: window_samples (", window,
                                                   ") must be a multiple of samples_per_frame (", per_frame, ")"));
  }
  if (overlap % per_frame != 0) {
    return absl::InvalidArgumentError(absl::StrCat("window plan: overlap_samples (", overlap,
                                                   ") must be a multiple of samples_per_frame (", per_frame, ")"));
  }
  if (!options.frames_for_samples) {
    return absl::InvalidArgumentError("window plan: frames_for_samples is not set");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AudioWindow>> PlanWindows(int64_t total_samples, const WindowPlanOptions& options) {
  if (absl::Status valid = ValidateWindowPlanOptions(options); !valid.ok()) return valid;
  if (total_samples < 0) {
    return absl::InvalidArgumentError(absl::StrCat("window plan: total_samples must be >= 0, got ", total_samples));
  }
  std::vector<AudioWindow> plan;
  if (total_samples == 0) return plan;

  const int64_t total_frames = options.frames_for_samples(total_samples);
  if (total_frames <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("window plan: frames_for_samples(", total_samples, ") is ",
                                                   total_frames, "; audio with samples needs frames"));
  }
  const int64_t window = options.window_samples;
  const int64_t per_frame = options.samples_per_frame;
  if (total_samples <= window) {
    plan.push_back({0, total_samples, total_frames, 0, total_frames, 0});
    return plan;
  }

  const int64_t overlap_frames = options.overlap_samples / per_frame;
  // Stride and starts are multiples of samples_per_frame because window and overlap are.
  const int64_t stride = window - 2 * options.overlap_samples;
  const int64_t inner_keep_end = (window - options.overlap_samples) / per_frame;
  int64_t kept = 0;
  for (int64_t start = 0;; start += stride) {
    const bool last = start + window >= total_samples;
    AudioWindow w;
    w.start_sample = start;
    w.num_samples = last ? total_samples - start : window;
    w.num_frames = options.frames_for_samples(w.num_samples);
    w.keep_begin_frame = start == 0 ? 0 : overlap_frames;
    w.keep_end_frame = last ? w.num_frames : inner_keep_end;
    w.global_begin_frame = start / per_frame + w.keep_begin_frame;
    if (w.keep_end_frame > w.num_frames || w.keep_begin_frame >= w.keep_end_frame) {
      return absl::InvalidArgumentError(absl::StrCat(
          "window plan: window ", plan.size(), " (", w.num_samples, " samples from sample ", start,
          ") would keep its frames [", w.keep_begin_frame, ", ", w.keep_end_frame, ") but frames_for_samples(",
          w.num_samples, ") is ", w.num_frames, "; frames_for_samples does not fit samples_per_frame ",
          per_frame));
    }
    kept += w.keep_end_frame - w.keep_begin_frame;
    plan.push_back(w);
    if (last) break;
  }
  // Only the last window's end depends on frames_for_samples(its length): check it lands on the model's end.
  if (kept != total_frames) {
    return absl::InvalidArgumentError(absl::StrCat(
        "window plan: the windows' kept frames add up to ", kept, " but frames_for_samples(", total_samples,
        ") is ", total_frames, "; frames_for_samples is not consistent with samples_per_frame ", per_frame));
  }
  return plan;
}

int64_t StitchedFrames(const std::vector<AudioWindow>& plan) {
  int64_t frames = 0;
  for (const AudioWindow& w : plan) frames += w.keep_end_frame - w.keep_begin_frame;
  return frames;
}

absl::StatusOr<std::vector<float>> Stitch(const std::vector<AudioWindow>& plan,
                                          const std::vector<std::vector<float>>& window_log_probs,
                                          int64_t num_classes) {
  if (num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("stitch: num_classes must be > 0, got ", num_classes));
  }
  if (window_log_probs.size() != plan.size()) {
    return absl::InvalidArgumentError(absl::StrCat("stitch: the plan has ", plan.size(), " windows but ",
                                                   window_log_probs.size(), " window outputs were given"));
  }
  int64_t next_frame = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const AudioWindow& w = plan[i];
    if (w.keep_begin_frame < 0 || w.keep_begin_frame > w.keep_end_frame || w.keep_end_frame > w.num_frames ||
        w.global_begin_frame != next_frame) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stitch: window ", i, " keeps frames [", w.keep_begin_frame, ", ", w.keep_end_frame, ") of ",
          w.num_frames, " at global frame ", w.global_begin_frame, "; expected a range inside its frames at ",
          next_frame));
    }
    const size_t values = window_log_probs[i].size();
    if (values != static_cast<size_t>(w.num_frames * num_classes)) {
      return absl::InvalidArgumentError(absl::StrCat("stitch: window ", i, " output has ", values,
                                                     " values; expected ", w.num_frames, " frames x ", num_classes,
                                                     " classes = ", w.num_frames * num_classes));
    }
    next_frame += w.keep_end_frame - w.keep_begin_frame;
  }

  std::vector<float> stitched;
  stitched.reserve(next_frame * num_classes);
  for (size_t i = 0; i < plan.size(); ++i) {
    const std::vector<float>& from = window_log_probs[i];
    stitched.insert(stitched.end(), from.begin() + plan[i].keep_begin_frame * num_classes,
                    from.begin() + plan[i].keep_end_frame * num_classes);
  }
  return stitched;
}

}  // namespace sluice::voice
