#include "backend/base/speech_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/base/stream_step_config.h"

namespace sluice {
namespace {

// An integer key in [min, max] milliseconds (or samples), naming the bounds when it is outside.
absl::StatusOr<int64_t> BoundedInt(const YamlNode& node, int64_t min, int64_t max) {
  SLUICE_ASSIGN_OR_RETURN(int64_t value, node.AsInt());
  if (value < min || value > max) return node.Error(absl::StrCat("must be between ", min, " and ", max));
  return value;
}

absl::StatusOr<StreamingSpeechOptions> ParseStreaming(const YamlNode& node) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"step_ms", "left_context_ms", "lookahead_ms", "endpoint_silence_ms"}));
  StreamingSpeechOptions options;
  constexpr int64_t kMinuteMs = 60'000;
  if (auto v = node.Optional("step_ms")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t ms, BoundedInt(*v, 10, kMinuteMs));
    options.step_ms = static_cast<int>(ms);
  }
  if (auto v = node.Optional("left_context_ms")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t ms, BoundedInt(*v, 0, kMinuteMs));
    options.left_context_ms = static_cast<int>(ms);
  }
  if (auto v = node.Optional("lookahead_ms")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t ms, BoundedInt(*v, 0, kMinuteMs));
    options.lookahead_ms = static_cast<int>(ms);
  }
  if (auto v = node.Optional("endpoint_silence_ms")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t ms, BoundedInt(*v, 40, kMinuteMs));
    options.endpoint_silence_ms = static_cast<int>(ms);
  }
  return options;
}

}  // namespace

absl::StatusOr<SpeechOptions> ParseSpeechOptions(const YamlNode& node) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"vocabulary", "blank", "word_separator", "frame_samples", "output",
                                         "max_audio_seconds", "long_audio_overlap_ms", "streaming", "stream_step"}));
  SpeechOptions options;
  SLUICE_ASSIGN_OR_RETURN(YamlNode vocabulary, node.Required("vocabulary"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> symbols, vocabulary.AsSequence());
  if (symbols.size() < 2) return vocabulary.Error("needs the blank and at least one symbol");
  for (const YamlNode& symbol : symbols) {
    SLUICE_ASSIGN_OR_RETURN(std::string text, symbol.AsString());
    if (text.empty()) return symbol.Error("a symbol must not be empty");
    options.vocabulary.push_back(std::move(text));
  }
  if (auto blank = node.Optional("blank")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t index, BoundedInt(*blank, 0, static_cast<int64_t>(symbols.size()) - 1));
    options.blank = static_cast<int>(index);
  }
  if (auto separator = node.Optional("word_separator")) {
    SLUICE_ASSIGN_OR_RETURN(options.word_separator, separator->AsString());
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode frame_samples, node.Required("frame_samples"));
  SLUICE_ASSIGN_OR_RETURN(options.frame_samples, BoundedInt(frame_samples, 1, 1'000'000));
  if (auto output = node.Optional("output")) {
    SLUICE_ASSIGN_OR_RETURN(options.output, output->AsString());
  }
  if (auto max_seconds = node.Optional("max_audio_seconds")) {
    SLUICE_ASSIGN_OR_RETURN(options.max_audio_seconds, max_seconds->AsDouble());
    // A day: beyond that a single request is a mistake, and the bound keeps sample counts far from overflow.
    if (!(std::isfinite(options.max_audio_seconds) && options.max_audio_seconds > 0 &&
          options.max_audio_seconds <= 86400)) {
      return max_seconds->Error("must be > 0 and at most 86400");
    }
  }
  if (auto overlap = node.Optional("long_audio_overlap_ms")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t ms, BoundedInt(*overlap, 0, 60'000));
    options.long_audio_overlap_ms = static_cast<int>(ms);
    options.long_audio_overlap_set = true;
  }
  if (auto streaming = node.Optional("streaming")) {
    SLUICE_ASSIGN_OR_RETURN(options.streaming, ParseStreaming(*streaming));
  }
  if (auto stream_step = node.Optional("stream_step")) {
    // Checked here (file:line errors at load); the stream engine reads it with LoadStreamStepOptions.
    SLUICE_RETURN_IF_ERROR(ParseStreamStepOptions(*stream_step, options.frame_samples).status());
  }
  return options;
}

}  // namespace sluice
