// The `speech.stream_step` section of a cache-aware streaming speech model's config.yaml (backend/compile/README.md
// "Cache-aware streaming"): the model's stream_step_b<B> graphs step every stream by one chunk, their state held in
// slots by the backend (backend/stream_step_backend.h), stepped together by the stream engine
// (server/voice/stream_engine.h).
//
//   speech:
//     stream_step:
//       chunk_samples: 2560    # audio per step and stream (a multiple of frame_samples)
//       slots: 64              # streams one instance holds state for (the scratch slot comes on top)
//       batch_sizes: [1, 2, 4, 8, 16, 32, 64]  # graphs/stream_step_b<B>.pt, ascending, each <= slots
//       states: [{name: kv, shape: [2, 32, 288]}, ...]  # per-slot FP32 state tensors, in graph argument order
//       max_wait_ms: 40        # a step waits at most this for more streams' chunks (default: a quarter chunk)
//
// ParseSpeechOptions checks the section when the model's config loads (file:line errors); the backend and the
// engine read it with LoadStreamStepOptions. It is kept out of SpeechOptions (model_config.h) so that adding it did
// not rebuild every file that includes the model config; it may move there.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/model_config.h"
#include "backend/base/yaml_node.h"

namespace sluice {

// One per-slot state tensor: the backend holds FP32 [slots + 1, shape...].
struct StreamStateSpec {
  std::string name;
  std::vector<int64_t> shape;
};

struct StreamStepOptions {
  int64_t chunk_samples = 0;
  int slots = 0;
  std::vector<int> batch_sizes;  // ascending
  std::vector<StreamStateSpec> states;
  int max_wait_ms = -1;          // -1: a quarter of a chunk's duration
  int64_t frames_per_chunk = 0;  // chunk_samples / frame_samples
};

absl::StatusOr<StreamStepOptions> ParseStreamStepOptions(const YamlNode& node, int64_t frame_samples);

// The section of `model` (re-read from <directory>/config.yaml), nullopt when it has none (or no speech section).
absl::StatusOr<std::optional<StreamStepOptions>> LoadStreamStepOptions(const ModelConfig& model);

}  // namespace sluice
