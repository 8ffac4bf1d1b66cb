// The `speech:` section of a speech model's config.yaml: what the voice API (Riva-compatible Recognize and
// StreamingRecognize, server/voice/) needs to turn the model's CTC log-probs into text, and how it windows long
// audio and live streams. A `kind: speech` model without this section is served over KServe v2 only.
//
//   speech:
//     vocabulary: ["<blank>", "a", ..., " ", "'"]  # output class i -> its text (characters or word pieces)
//     blank: 0                 # the CTC blank's class
//     word_separator: " "      # the symbol that separates words (word pieces starting with U+2581 also do)
//     frame_samples: 640       # input samples per output frame: N samples give ceil(N / frame_samples) frames
//     output: log_probs        # the [frames, classes] output to decode (default: the first output)
//     max_audio_seconds: 3600  # longer audio is refused (offline and per stream)
//     long_audio_overlap_ms: 2000  # Recognize over the largest bucket: windows overlap this much on each side
//                                  # (default: 2000, or a quarter of the largest bucket when that is shorter)
//     streaming: {step_ms: 480, left_context_ms: 2000, lookahead_ms: 960, endpoint_silence_ms: 800}
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/yaml_node.h"

namespace sluice {

// How a live stream is cut into model runs (server/voice/streaming_recognizer.h has the algorithm).
struct StreamingSpeechOptions {
  int step_ms = 480;             // run the model once per this much new audio
  int left_context_ms = 2000;    // audio before the newest decided frame that each run sees again
  int lookahead_ms = 960;        // the newest frames of a run stay provisional (interim) until a later run
  int endpoint_silence_ms = 800; // this much trailing blank output after speech ends the segment (final result)
};

struct SpeechOptions {
  std::vector<std::string> vocabulary;
  int blank = 0;
  std::string word_separator = " ";
  int64_t frame_samples = 0;
  std::string output;  // resolved to a declared output's name by ParseModelConfig
  double max_audio_seconds = 3600;
  int long_audio_overlap_ms = 2000;
  bool long_audio_overlap_set = false;  // given in the file (else ParseModelConfig may shorten the default)
  StreamingSpeechOptions streaming;
};

// Parses the section; cross-checks against the outputs are ParseModelConfig's (it knows them).
absl::StatusOr<SpeechOptions> ParseSpeechOptions(const YamlNode& node);

}  // namespace sluice
