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
//     streaming: {step_ms: 480, left_context_ms: 2000, lookahead_ms: 960, endpoint_silence_ms: 800, shared_tick: false}
//
// An encoder-decoder recognizer (Whisper) says so and names its prompt tokens instead of the CTC keys; its
// encoder is the model's (batch, length) graphs (output `output`: the encoder's hidden states, FP32 [positions,
// hidden]) and its decoder the model's `generation:` section (prefill = admission writing the cross-attention K/V):
//
//   speech:
//     recognizer: whisper      # ctc (default) | whisper
//     output: encoder_hidden
//     max_audio_seconds: 600   # longer recordings are cut into 30 s windows (the largest bucket), decoded apart
//     whisper:
//       start_token_id: 50258          # <|startoftranscript|>
//       transcribe_token_id: 50359     # <|transcribe|>
//       no_timestamps_token_id: 50363  # <|notimestamps|>
//       languages: [en, zh, ...]       # ISO-639-1 codes, in the order of language_token_ids
//       language_token_ids: [50259, 50260, ...]
//       suppress_tokens: [1, 2, ...]   # never generated
//       begin_suppress_tokens: [220, 50257]  # never the first generated token
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
  // All streams of the model start their windows on one shared tick (every step_ms), so they batch together: fewer,
  // fuller executions, for devices whose batch costs about the same whatever its rows (Neuron, GPU, sim). Off by
  // default: on the CPU a batch costs about its rows, and the tick measured +100 ms chunk latency (p50) for no
  // gain there (loadtest/bench/results/streaming.md). false: a stream runs a window once it has step_ms of new audio.
  bool shared_tick = false;
};

// Whisper's prompt and suppress rules (generation_config.json's, written by backend/compile/whisper_export.py).
struct WhisperOptions {
  int start_token_id = 0;
  int transcribe_token_id = 0;
  int no_timestamps_token_id = 0;
  std::vector<std::string> languages;      // ISO-639-1 codes
  std::vector<int> language_token_ids;     // parallel to languages
  std::vector<int> suppress_tokens;
  std::vector<int> begin_suppress_tokens;
};

enum class RecognizerKind { kCtc, kWhisper };

struct SpeechOptions {
  RecognizerKind recognizer = RecognizerKind::kCtc;
  WhisperOptions whisper;  // recognizer kWhisper only
  std::vector<std::string> vocabulary;  // CTC only
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
