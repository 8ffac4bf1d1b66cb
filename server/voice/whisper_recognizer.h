// Whisper as a Recognizer (recognizer.h): an encoder-decoder speech model (ModelConfig::is_encoder_decoder) whose
// encoder is the model's batched (batch, 30 s) graphs, run through its ServedModel (the dynamic batcher: the windows
// of every recording and client batch together), and whose decoder is the model's SpeechDecoder engine (the
// continuous batcher: each window's sequence is admitted with its encoder output, the prefill graph writing its
// cross-attention K/V into the sequence's slot, and every decode step holds the running sequences of every window,
// recording and client).
//
// One recording: cut into windows of the largest bucket (Whisper's 30 s; the last one shorter), each encoded and
// decoded on its own, the window texts joined with one space (no prompt from the previous window, no overlap: a
// word cut by a window edge may be misheard; the windows of one recording decode in parallel). Per window, the
// prompt <|startoftranscript|><|lang|><|transcribe|><|notimestamps|>; without a language given, a one-token
// sequence of prompt <|startoftranscript|> restricted to the language tokens picks it first (Whisper's detection
// from the first step's language-token logits). Greedy decoding with suppress_tokens at every step and
// begin_suppress_tokens at the first; EOS ends the window, or the KV length (generation.context_length) does.
//
// Thread-safety: immutable after Create; Start may be called from any thread at once (recognizer.h's contract).
// A recording's state is shared by its encoder and decoder callbacks and its handle, guarded by its own mutex
// (a leaf: nothing is called under it).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/continuous_batcher.h"
#include "server/core/served_model.h"
#include "server/llm/tokenizer.h"
#include "server/voice/recognizer.h"

namespace sluice::voice {

class WhisperRecognizer final : public Recognizer {
 public:
  // FailedPrecondition naming the model when it is not an encoder-decoder speech model with recognizer whisper or
  // `decoder` is null; the tokenizer (generation.tokenizer) is loaded here. Both must outlive the recognizer.
  static absl::StatusOr<std::unique_ptr<WhisperRecognizer>> Create(ServedModel* encoder, ContinuousBatcher* decoder);

  const ModelConfig& config() const override { return encoder_->config(); }
  int sample_rate() const override { return *config().inputs.front().sample_rate; }
  std::shared_ptr<RecognitionHandle> Start(std::vector<float> audio, const RecognizeOptions& options,
                                           RecognitionDone done) const override;

  // The language token of `language` ("en" or a BCP-47 tag "en-US"; case-insensitive); InvalidArgument naming it
  // and the model's languages otherwise.
  absl::StatusOr<int> LanguageToken(std::string_view language) const;
  // The ISO-639-1 code of a language token ("" when it is none).
  std::string LanguageOf(int token) const;

 private:
  class Recording;
  WhisperRecognizer(ServedModel* encoder, ContinuousBatcher* decoder, std::unique_ptr<Tokenizer> tokenizer)
      : encoder_(encoder), decoder_(decoder), tokenizer_(std::move(tokenizer)) {}

  ServedModel* const encoder_;
  ContinuousBatcher* const decoder_;
  const std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace sluice::voice
