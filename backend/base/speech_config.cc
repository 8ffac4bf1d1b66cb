#include "backend/base/speech_config.h"

#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

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
  SLUICE_RETURN_IF_ERROR(
      node.CheckKeys({"step_ms", "left_context_ms", "lookahead_ms", "endpoint_silence_ms", "shared_tick"}));
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
  if (auto v = node.Optional("shared_tick")) {
    SLUICE_ASSIGN_OR_RETURN(options.shared_tick, v->AsBool());
  }
  return options;
}

absl::StatusOr<std::vector<int>> TokenIdList(const YamlNode& node, std::string_view key, bool required) {
  std::vector<int> ids;
  std::optional<YamlNode> list = node.Optional(key);
  if (!list) {
    if (required) return node.Required(key).status();
    return ids;
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> values, list->AsIntList());
  for (int64_t value : values) {
    if (value < 0 || value > (int64_t{1} << 30)) return list->Error("token ids must be >= 0");
    ids.push_back(static_cast<int>(value));
  }
  return ids;
}

absl::StatusOr<WhisperOptions> ParseWhisper(const YamlNode& node) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"start_token_id", "transcribe_token_id", "no_timestamps_token_id",
                                         "languages", "language_token_ids", "suppress_tokens",
                                         "begin_suppress_tokens"}));
  WhisperOptions options;
  for (auto [key, field] : {std::pair{"start_token_id", &options.start_token_id},
                            {"transcribe_token_id", &options.transcribe_token_id},
                            {"no_timestamps_token_id", &options.no_timestamps_token_id}}) {
    SLUICE_ASSIGN_OR_RETURN(YamlNode value, node.Required(key));
    SLUICE_ASSIGN_OR_RETURN(int64_t id, BoundedInt(value, 0, int64_t{1} << 30));
    *field = static_cast<int>(id);
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode languages, node.Required("languages"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> codes, languages.AsSequence());
  for (const YamlNode& code : codes) {
    SLUICE_ASSIGN_OR_RETURN(std::string text, code.AsString());
    if (text.empty()) return code.Error("a language code must not be empty");
    options.languages.push_back(std::move(text));
  }
  if (options.languages.empty()) return languages.Error("must list at least one language");
  SLUICE_ASSIGN_OR_RETURN(options.language_token_ids, TokenIdList(node, "language_token_ids", true));
  if (options.language_token_ids.size() != options.languages.size()) {
    return node.Required("language_token_ids")->Error(absl::StrCat(
        "has ", options.language_token_ids.size(), " ids for ", options.languages.size(), " languages"));
  }
  SLUICE_ASSIGN_OR_RETURN(options.suppress_tokens, TokenIdList(node, "suppress_tokens", false));
  SLUICE_ASSIGN_OR_RETURN(options.begin_suppress_tokens, TokenIdList(node, "begin_suppress_tokens", false));
  return options;
}

absl::StatusOr<RecognizerKind> ParseRecognizer(const YamlNode& node) {
  SLUICE_ASSIGN_OR_RETURN(std::string text, node.AsString());
  if (text == "ctc") return RecognizerKind::kCtc;
  if (text == "whisper") return RecognizerKind::kWhisper;
  return node.Error(absl::StrCat("unknown recognizer '", text, "' (expected ctc or whisper)"));
}

// recognizer: whisper: the encoder-decoder keys; the CTC ones have no meaning there.
absl::StatusOr<SpeechOptions> ParseWhisperSpeech(const YamlNode& node, SpeechOptions options) {
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"recognizer", "output", "max_audio_seconds", "whisper"}));
  SLUICE_ASSIGN_OR_RETURN(YamlNode whisper, node.Required("whisper"));
  SLUICE_ASSIGN_OR_RETURN(options.whisper, ParseWhisper(whisper));
  return options;
}

}  // namespace

absl::StatusOr<SpeechOptions> ParseSpeechOptions(const YamlNode& node) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SpeechOptions options;
  if (auto recognizer = node.Optional("recognizer")) {
    SLUICE_ASSIGN_OR_RETURN(options.recognizer, ParseRecognizer(*recognizer));
  }
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
  if (options.recognizer == RecognizerKind::kWhisper) return ParseWhisperSpeech(node, std::move(options));
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"recognizer", "vocabulary", "blank", "word_separator", "frame_samples",
                                         "output", "max_audio_seconds", "long_audio_overlap_ms", "streaming",
                                         "stream_step"}));
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
