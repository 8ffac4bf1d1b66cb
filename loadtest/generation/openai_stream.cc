#include "loadtest/generation/openai_stream.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {
namespace {

using Json = rapidjson::Value;

const Json* Member(const Json& object, const char* key) {
  if (!object.IsObject()) return nullptr;
  auto it = object.FindMember(key);
  if (it == object.MemberEnd() || it->value.IsNull()) return nullptr;
  return &it->value;
}

std::optional<int64_t> IntMember(const Json& object, const char* key) {
  const Json* v = Member(object, key);
  if (v == nullptr || !v->IsInt64()) return std::nullopt;
  return v->GetInt64();
}

}  // namespace

const char* OpenAiPath(const GenerationSpec& spec) { return spec.chat ? "/v1/chat/completions" : "/v1/completions"; }

std::string EncodeOpenAiCompletionBody(const GenerationSpec& spec) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("model");
  w.String(spec.model.c_str(), spec.model.size());
  if (spec.chat) {
    w.Key("messages");
    w.StartArray();
    w.StartObject();
    w.Key("role");
    w.String("user");
    w.Key("content");
    w.String(spec.prompt_text.c_str(), spec.prompt_text.size());
    w.EndObject();
    w.EndArray();
  } else {
    w.Key("prompt");
    if (!spec.prompt_ids.empty()) {
      w.StartArray();
      for (int32_t id : spec.prompt_ids) w.Int(id);
      w.EndArray();
    } else {
      w.String(spec.prompt_text.c_str(), spec.prompt_text.size());
    }
  }
  if (spec.max_tokens > 0) {
    w.Key("max_tokens");
    w.Int64(spec.max_tokens);
  }
  if (spec.ignore_eos) {
    w.Key("ignore_eos");
    w.Bool(true);
  }
  if (spec.temperature) {
    w.Key("temperature");
    w.Double(*spec.temperature);
  }
  if (spec.seed) {
    w.Key("seed");
    w.Int64(*spec.seed);
  }
  w.Key("stream");
  w.Bool(true);
  w.Key("stream_options");
  w.StartObject();
  w.Key("include_usage");
  w.Bool(true);
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::vector<std::string> SseParser::Feed(absl::string_view bytes) {
  std::vector<std::string> events;
  for (char c : bytes) {
    if (c != '\n') {
      line_.push_back(c);
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {  // blank line: the event ends
      if (has_data_) events.push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
    } else if (absl::StartsWith(line_, "data:")) {
      absl::string_view value = absl::string_view(line_).substr(5);
      if (absl::StartsWith(value, " ")) value.remove_prefix(1);
      if (has_data_) data_.push_back('\n');
      data_.append(value.data(), value.size());
      has_data_ = true;
    }  // comments (":...") and other fields are ignored
    line_.clear();
  }
  return events;
}

absl::StatusOr<OpenAiChunk> ParseOpenAiChunk(absl::string_view data) {
  OpenAiChunk chunk;
  if (data == "[DONE]") {
    chunk.done = true;
    return chunk;
  }
  rapidjson::Document doc;
  doc.Parse(data.data(), data.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError(absl::StrCat("an SSE event is not a JSON object: ", data.substr(0, 120)));
  }
  if (const Json* error = Member(doc, "error")) {
    const Json* message = Member(*error, "message");
    chunk.error_message = message != nullptr && message->IsString() ? message->GetString() : "error event";
    const Json* type = Member(*error, "type");
    if (type != nullptr && type->IsString()) chunk.error_type = type->GetString();
    return chunk;
  }
  if (const Json* choices = Member(doc, "choices"); choices != nullptr && choices->IsArray() && !choices->Empty()) {
    const Json& choice = (*choices)[0];
    const Json* text = Member(choice, "text");
    if (const Json* delta = Member(choice, "delta")) text = Member(*delta, "content");
    if (text != nullptr && text->IsString()) chunk.text = std::string(text->GetString(), text->GetStringLength());
    if (const Json* finish = Member(choice, "finish_reason"); finish != nullptr && finish->IsString()) {
      chunk.finish_reason = finish->GetString();
    }
  }
  if (const Json* usage = Member(doc, "usage")) {
    chunk.prompt_tokens = IntMember(*usage, "prompt_tokens");
    chunk.completion_tokens = IntMember(*usage, "completion_tokens");
  }
  return chunk;
}

void OpenAiStreamState::Feed(absl::string_view bytes, double at_s) {
  for (const std::string& data : parser_.Feed(bytes)) {
    absl::StatusOr<OpenAiChunk> chunk = ParseOpenAiChunk(data);
    if (!chunk.ok()) {
      if (!outcome_.error_message) outcome_.error_message = std::string(chunk.status().message());
      continue;
    }
    if (chunk->done) outcome_.done = true;
    if (chunk->error_message && !outcome_.error_message) {
      outcome_.error_message = chunk->error_message;
      outcome_.error_type = chunk->error_type;
    }
    if (chunk->text && !chunk->text->empty()) {
      outcome_.chunk_times_s.push_back(at_s);
      outcome_.text += *chunk->text;
    }
    if (chunk->finish_reason) outcome_.finish_reason = *chunk->finish_reason;
    if (chunk->prompt_tokens) outcome_.prompt_tokens = chunk->prompt_tokens;
    if (chunk->completion_tokens) outcome_.completion_tokens = chunk->completion_tokens;
  }
}

int CodeForOpenAiErrorType(absl::string_view type) {
  if (type == "invalid_request_error") return 3;  // INVALID_ARGUMENT
  if (type == "rate_limit_error") return 8;       // RESOURCE_EXHAUSTED
  if (type == "authentication_error") return 16;  // UNAUTHENTICATED
  return 13;                                      // INTERNAL
}

std::string OpenAiErrorMessage(absl::string_view body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (!doc.HasParseError()) {
    if (const Json* error = Member(doc, "error")) {
      if (const Json* message = Member(*error, "message"); message != nullptr && message->IsString()) {
        return message->GetString();
      }
      if (error->IsString()) return error->GetString();
    }
  }
  return std::string(body.substr(0, 200));
}

StreamVerdict JudgeStream(const GenerationOutcome& o, const GenerationSpec& spec) {
  if (o.error_message) return {CodeForOpenAiErrorType(o.error_type), *o.error_message};
  if (!o.done) return {14, "the stream ended without data: [DONE]"};  // UNAVAILABLE
  auto mismatch = [](std::string message) { return StreamVerdict{kUsageMismatchCode, std::move(message)}; };
  if (!o.prompt_tokens || !o.completion_tokens) return mismatch("no usage in the stream (include_usage was asked)");
  if (!spec.prompt_ids.empty() && *o.prompt_tokens != static_cast<int64_t>(spec.prompt_ids.size())) {
    return mismatch(absl::StrCat("usage.prompt_tokens ", *o.prompt_tokens, " but ", spec.prompt_ids.size(),
                                 " prompt ids were sent"));
  }
  if (spec.max_tokens > 0 && *o.completion_tokens > spec.max_tokens) {
    return mismatch(absl::StrCat("usage.completion_tokens ", *o.completion_tokens, " exceeds max_tokens ",
                                 spec.max_tokens));
  }
  if (spec.ignore_eos && spec.max_tokens > 0 && *o.completion_tokens != spec.max_tokens) {
    return mismatch(absl::StrCat("usage.completion_tokens ", *o.completion_tokens, " but ignore_eos with max_tokens ",
                                 spec.max_tokens, " (finish ", o.finish_reason, ")"));
  }
  if (o.chunks() > *o.completion_tokens) {
    return mismatch(absl::StrCat(o.chunks(), " content chunks streamed but usage.completion_tokens ",
                                 *o.completion_tokens));
  }
  if (o.chunks() == 0 && *o.completion_tokens > 0 && !o.text.empty()) {
    return mismatch("text without content chunks");
  }
  return {};
}

}  // namespace sluice::loadtest
