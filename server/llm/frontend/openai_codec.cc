#include "server/llm/frontend/openai_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <utility>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "absl/functional/function_ref.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "backend/base/status_mapping.h"
#include "server/kserve/http_codec.h"

namespace sluice {
namespace {

using Json = rapidjson::Value;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

absl::Status Bad(absl::string_view param, absl::string_view message) {
  return WithRequestField(absl::InvalidArgumentError(message), param);
}

// The member, or null when it is absent or JSON null (clients send null for "not given").
const Json* Member(const Json& object, const char* key) {
  auto it = object.FindMember(key);
  if (it == object.MemberEnd() || it->value.IsNull()) return nullptr;
  return &it->value;
}

// Nesting depth, measured iteratively (the document was parsed iteratively too): a hostile body costs heap
// bounded by its size, never stack.
bool DeeperThan(const Json& root, int limit) {
  struct Level {
    const Json* value;
    int depth;
  };
  std::vector<Level> stack = {{&root, 1}};
  while (!stack.empty()) {
    const Level level = stack.back();
    stack.pop_back();
    if (level.depth > limit) return true;
    if (level.value->IsArray()) {
      for (const Json& v : level.value->GetArray()) {
        if (v.IsArray() || v.IsObject()) stack.push_back({&v, level.depth + 1});
      }
    } else if (level.value->IsObject()) {
      for (const auto& m : level.value->GetObject()) {
        if (m.value.IsArray() || m.value.IsObject()) stack.push_back({&m.value, level.depth + 1});
      }
    }
  }
  return false;
}

absl::Status ReadInt(const Json& doc, const char* key, std::optional<int64_t>& out) {
  const Json* v = Member(doc, key);
  if (v == nullptr) return absl::OkStatus();
  if (v->IsUint64() && !v->IsInt64()) {
    return Bad(key, absl::StrCat("'", key, "' is ", v->GetUint64(), ", out of range"));
  }
  if (!v->IsInt64()) return Bad(key, absl::StrCat("'", key, "' must be an integer"));
  out = v->GetInt64();  // as given: the one range check (GenerationModel) reports the real value and the limit
  return absl::OkStatus();
}

absl::Status ReadFloat(const Json& doc, const char* key, float& out) {
  const Json* v = Member(doc, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsNumber()) return Bad(key, absl::StrCat("'", key, "' must be a number"));
  const double d = v->GetDouble();
  const float inf = std::numeric_limits<float>::infinity();
  out = std::fabs(d) > std::numeric_limits<float>::max() ? (d < 0 ? -inf : inf) : static_cast<float>(d);
  return absl::OkStatus();
}

absl::Status ReadBool(const Json& doc, const char* key, bool& out) {
  const Json* v = Member(doc, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsBool()) return Bad(key, absl::StrCat("'", key, "' must be a boolean"));
  out = v->GetBool();
  return absl::OkStatus();
}

absl::Status ReadStop(const Json& doc, std::vector<std::string>& out) {
  const Json* v = Member(doc, "stop");
  if (v == nullptr) return absl::OkStatus();
  if (v->IsString()) {
    out.emplace_back(v->GetString(), v->GetStringLength());
    return absl::OkStatus();
  }
  if (!v->IsArray()) return Bad("stop", "'stop' must be a string or an array of strings");
  for (const Json& s : v->GetArray()) {
    if (!s.IsString()) return Bad("stop", "'stop' must be a string or an array of strings");
    out.emplace_back(s.GetString(), s.GetStringLength());
  }
  return absl::OkStatus();
}

// OpenAI features sluice does not implement: refused by name rather than silently ignored.
absl::Status RefuseUnsupported(const Json& doc) {
  if (const Json* n = Member(doc, "n"); n != nullptr && !(n->IsInt64() && n->GetInt64() == 1)) {
    return Bad("n", "only n = 1 is supported");
  }
  if (const Json* b = Member(doc, "best_of"); b != nullptr && !(b->IsInt64() && b->GetInt64() == 1)) {
    return Bad("best_of", "only best_of = 1 is supported");
  }
  if (const Json* l = Member(doc, "logprobs"); l != nullptr && !(l->IsBool() && !l->GetBool())) {
    return Bad("logprobs", "logprobs are not supported");
  }
  if (Member(doc, "top_logprobs") != nullptr) return Bad("top_logprobs", "logprobs are not supported");
  for (const char* key : {"presence_penalty", "frequency_penalty"}) {
    if (const Json* p = Member(doc, key); p != nullptr && !(p->IsNumber() && p->GetDouble() == 0)) {
      return Bad(key, absl::StrCat("'", key, "' is not supported (only 0)"));
    }
  }
  if (const Json* b = Member(doc, "logit_bias"); b != nullptr && !(b->IsObject() && b->MemberCount() == 0)) {
    return Bad("logit_bias", "logit_bias is not supported");
  }
  if (const Json* s = Member(doc, "suffix"); s != nullptr && !(s->IsString() && s->GetStringLength() == 0)) {
    return Bad("suffix", "suffix is not supported");
  }
  for (const char* key : {"tools", "functions"}) {
    if (const Json* t = Member(doc, key); t != nullptr && !(t->IsArray() && t->Empty())) {
      return Bad(key, "tools and function calling are not supported");
    }
  }
  if (const Json* f = Member(doc, "response_format"); f != nullptr) {
    const Json* type = f->IsObject() ? Member(*f, "type") : nullptr;
    if (type == nullptr || !type->IsString() || absl::string_view(type->GetString()) != "text") {
      return Bad("response_format", "only response_format {\"type\": \"text\"} is supported");
    }
  }
  return absl::OkStatus();
}

// The sampling fields both endpoints share.
absl::Status ReadSampling(const Json& doc, GenerationCall& call, OpenAiRequest& request) {
  call.sampling.temperature = 1.0f;  // OpenAI's defaults
  call.sampling.top_p = 1.0f;
  if (absl::Status s = ReadFloat(doc, "temperature", call.sampling.temperature); !s.ok()) return s;
  if (absl::Status s = ReadFloat(doc, "top_p", call.sampling.top_p); !s.ok()) return s;
  if (const Json* k = Member(doc, "top_k")) {
    if (!k->IsInt()) return Bad("top_k", "'top_k' must be an integer");
    call.sampling.top_k = k->GetInt() == -1 ? 0 : k->GetInt();  // vLLM's -1: all tokens
  }
  if (const Json* seed = Member(doc, "seed")) {
    if (!seed->IsInt64() && !seed->IsUint64()) return Bad("seed", "'seed' must be an integer");
    call.sampling.seed = seed->IsUint64() ? seed->GetUint64() : static_cast<uint64_t>(seed->GetInt64());
  }
  if (absl::Status s = ReadStop(doc, call.stop); !s.ok()) return s;
  if (absl::Status s = ReadBool(doc, "ignore_eos", call.ignore_eos); !s.ok()) return s;
  if (absl::Status s = ReadBool(doc, "stream", request.stream); !s.ok()) return s;
  if (const Json* options = Member(doc, "stream_options")) {
    if (!options->IsObject()) return Bad("stream_options", "'stream_options' must be an object");
    if (absl::Status s = ReadBool(*options, "include_usage", request.include_usage); !s.ok()) {
      return Bad("stream_options", "'stream_options.include_usage' must be a boolean");
    }
  }
  return RefuseUnsupported(doc);
}

absl::Status ReadPrompt(const Json& doc, GenerationCall& call) {
  const Json* prompt = Member(doc, "prompt");
  if (prompt == nullptr) return Bad("prompt", "'prompt' is required");
  if (prompt->IsArray() && prompt->Size() == 1 && ((*prompt)[0].IsString() || (*prompt)[0].IsArray())) {
    prompt = &(*prompt)[0];  // a batch of one prompt is that prompt
  }
  if (prompt->IsString()) {
    call.prompt = std::string(prompt->GetString(), prompt->GetStringLength());
    return absl::OkStatus();
  }
  if (!prompt->IsArray()) return Bad("prompt", "'prompt' must be a string or an array of token ids");
  std::vector<int32_t> ids;
  for (const Json& id : prompt->GetArray()) {
    if (id.IsString() || id.IsArray()) return Bad("prompt", "batched prompts are not supported");
    if ((id.IsInt64() || id.IsUint64()) && !id.IsInt()) {
      return Bad("prompt", absl::StrCat("'prompt' token id ", id.IsInt64() ? absl::StrCat(id.GetInt64())
                                                                             : absl::StrCat(id.GetUint64()),
                                        " (index ", ids.size(), ") is out of range (token ids are vocabulary "
                                        "indices, far below 2^31)"));
    }
    if (!id.IsInt()) return Bad("prompt", "'prompt' token ids must be integers");
    ids.push_back(id.GetInt());
  }
  call.prompt_ids = std::move(ids);
  return absl::OkStatus();
}

// A message's content: a string, or an array of {type: "text", text} parts (concatenated).
absl::StatusOr<std::string> ReadContent(const Json& message, const std::string& role) {
  const Json* content = Member(message, "content");
  if (content == nullptr) {
    if (role == "assistant") return std::string();
    return Bad("messages", "each message needs 'content'");
  }
  if (content->IsString()) return std::string(content->GetString(), content->GetStringLength());
  if (!content->IsArray()) return Bad("messages", "message 'content' must be a string or an array of text parts");
  std::string text;
  for (const Json& part : content->GetArray()) {
    const Json* type = part.IsObject() ? Member(part, "type") : nullptr;
    const Json* value = part.IsObject() ? Member(part, "text") : nullptr;
    if (type == nullptr || !type->IsString() || absl::string_view(type->GetString()) != "text" ||
        value == nullptr || !value->IsString()) {
      return Bad("messages", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
    text.append(value->GetString(), value->GetStringLength());
  }
  return text;
}

absl::Status ReadMessages(const Json& doc, GenerationCall& call) {
  const Json* messages = Member(doc, "messages");
  if (messages == nullptr || !messages->IsArray()) return Bad("messages", "'messages' must be an array");
  std::vector<ChatMessage> out;
  for (const Json& message : messages->GetArray()) {
    const Json* role = message.IsObject() ? Member(message, "role") : nullptr;
    if (role == nullptr || !role->IsString()) return Bad("messages", "each message needs a 'role' (string)");
    std::string name(role->GetString(), role->GetStringLength());
    if (name == "developer") name = "system";  // OpenAI's newer name for the system role
    if (name != "system" && name != "user" && name != "assistant") {
      return Bad("messages", absl::StrCat("message role '", name, "' is not supported (system, user, assistant)"));
    }
    absl::StatusOr<std::string> content = ReadContent(message, name);
    if (!content.ok()) return content.status();
    out.push_back({std::move(name), *std::move(content)});
  }
  call.messages = std::move(out);
  return absl::OkStatus();
}

// "usage": {prompt_tokens, completion_tokens, total_tokens}; an embedding has no completion tokens and OpenAI
// leaves that member out.
void Usage(Writer& w, int64_t prompt_tokens, std::optional<int64_t> completion_tokens) {
  w.Key("usage");
  w.StartObject();
  w.Key("prompt_tokens");
  w.Int64(prompt_tokens);
  if (completion_tokens) {
    w.Key("completion_tokens");
    w.Int64(*completion_tokens);
  }
  w.Key("total_tokens");
  w.Int64(prompt_tokens + completion_tokens.value_or(0));
  w.EndObject();
}

void Usage(Writer& w, const GenerationSummary& summary) {
  Usage(w, summary.prompt_tokens, summary.completion_tokens);
}

// Every string goes out as valid UTF-8 (a raw echo prompt, a model name or role in a message may not be).
void String(Writer& w, absl::string_view text) {
  const std::string valid = ValidUtf8(text);
  w.String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()));
}

// The length of the valid UTF-8 sequence at the start of `s` (RFC 3629: no overlongs, surrogates or > U+10FFFF),
// or 0.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

bool IsChat(const OpenAiResponseHead& head) { return head.endpoint == OpenAiEndpoint::kChat; }

// {"id", "object", "created", "model", — the caller writes "choices" (and "usage") and closes the object.
void Head(Writer& w, const OpenAiResponseHead& head, const char* object) {
  w.StartObject();
  w.Key("id");
  String(w, head.id);
  w.Key("object");
  w.String(object);
  w.Key("created");
  w.Int64(head.created);
  w.Key("model");
  String(w, head.model);
}

const char* ChunkObject(const OpenAiResponseHead& head) {
  return IsChat(head) ? "chat.completion.chunk" : "text_completion";
}

// One streamed chunk with a single choice: chat {delta: {role?, content?}}, completions {text}.
std::string Chunk(const OpenAiResponseHead& head, const char* role, std::optional<absl::string_view> text,
                  const char* finish_reason) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  Head(w, head, ChunkObject(head));
  w.Key("choices");
  w.StartArray();
  w.StartObject();
  w.Key("index");
  w.Int(0);
  if (IsChat(head)) {
    w.Key("delta");
    w.StartObject();
    if (role != nullptr) {
      w.Key("role");
      w.String(role);
    }
    if (text) {
      w.Key("content");
      String(w, *text);
    }
    w.EndObject();
  } else {
    w.Key("text");
    String(w, text.value_or(""));
    w.Key("logprobs");
    w.Null();
  }
  w.Key("finish_reason");
  if (finish_reason != nullptr) {
    w.String(finish_reason);
  } else {
    w.Null();
  }
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

// Everything but the model: the call and the response options.
absl::StatusOr<GenerationCall> DecodeCall(OpenAiEndpoint endpoint, const Json& doc, OpenAiRequest& request) {
  GenerationCall call;
  if (absl::Status s = ReadSampling(doc, call, request); !s.ok()) return s;
  if (endpoint == OpenAiEndpoint::kCompletions) {
    if (absl::Status s = ReadInt(doc, "max_tokens", call.max_tokens); !s.ok()) return s;
    if (absl::Status s = ReadBool(doc, "echo", call.echo); !s.ok()) return s;
    if (absl::Status s = ReadPrompt(doc, call); !s.ok()) return s;
  } else {
    if (absl::Status s = ReadInt(doc, "max_tokens", call.max_tokens); !s.ok()) return s;
    if (absl::Status s = ReadInt(doc, "max_completion_tokens", call.max_tokens); !s.ok()) return s;
    if (absl::Status s = ReadMessages(doc, call); !s.ok()) return s;
  }
  return call;
}

// `input` of an embeddings request: one text or a list of texts.
absl::StatusOr<EmbeddingCall> ReadEmbeddingInput(const Json& doc) {
  const Json* input = Member(doc, "input");
  if (input == nullptr) return Bad("input", "'input' is required");
  constexpr absl::string_view kTypes = "'input' must be a string or an array of strings";
  constexpr absl::string_view kNoIds = "token-id inputs are not supported: send 'input' as text";
  EmbeddingCall call;
  if (input->IsString()) {
    call.texts.emplace_back(input->GetString(), input->GetStringLength());
  } else if (input->IsArray()) {
    if (input->Empty()) return Bad("input", "'input' must not be an empty array");
    if (input->Size() > kMaxEmbeddingInputs) {
      return Bad("input", absl::StrCat("'input' has ", input->Size(), " items; at most ", kMaxEmbeddingInputs,
                                       " are allowed per request"));
    }
    for (const Json& item : input->GetArray()) {
      if (item.IsNumber() || item.IsArray()) return Bad("input", kNoIds);
      if (!item.IsString()) return Bad("input", kTypes);
      call.texts.emplace_back(item.GetString(), item.GetStringLength());
    }
  } else {
    return Bad("input", kTypes);
  }
  for (size_t i = 0; i < call.texts.size(); ++i) {
    if (call.texts[i].empty()) {
      return Bad("input", input->IsArray() ? absl::StrCat("'input[", i, "]' is an empty string")
                                           : std::string("'input' is an empty string"));
    }
  }
  return call;
}

absl::StatusOr<EmbeddingCall> DecodeEmbeddingCall(const Json& doc, OpenAiEmbeddingRequest& request) {
  if (const Json* format = Member(doc, "encoding_format")) {
    const absl::string_view value =
        format->IsString() ? absl::string_view(format->GetString(), format->GetStringLength()) : "";
    if (value != "float" && value != "base64") {
      return Bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    }
    request.base64 = value == "base64";
  }
  if (absl::Status s = ReadInt(doc, "dimensions", request.dimensions); !s.ok()) return s;
  if (const Json* user = Member(doc, "user"); user != nullptr && !user->IsString()) {
    return Bad("user", "'user' must be a string");
  }
  return ReadEmbeddingInput(doc);
}

// The parsed body, or the refusal of a body that is not a JSON object within the depth limit.
absl::Status ParseBody(absl::string_view body, rapidjson::Document& doc) {
  doc.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (doc.HasParseError()) {
    return Bad("", absl::StrCat("malformed JSON at offset ", doc.GetErrorOffset(), ": ",
                                rapidjson::GetParseError_En(doc.GetParseError())));
  }
  if (!doc.IsObject()) return Bad("", "request body must be a JSON object");
  if (DeeperThan(doc, kMaxJsonDataDepth)) {
    return Bad("", absl::StrCat("request body is nested deeper than ", kMaxJsonDataDepth, " levels"));
  }
  return absl::OkStatus();
}

// An OpenAI list object, the envelope of /v1/models and /v1/embeddings: {"object": "list", "data": [`count`
// objects, the i-th written by `item(w, i)`], then whatever members `trailer(w)` adds}.
std::string EncodeList(size_t count, absl::FunctionRef<void(Writer&, size_t)> item,
                       absl::FunctionRef<void(Writer&)> trailer) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("object");
  w.String("list");
  w.Key("data");
  w.StartArray();
  for (size_t i = 0; i < count; ++i) {
    w.StartObject();
    item(w, i);
    w.EndObject();
  }
  w.EndArray();
  trailer(w);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

absl::StatusOr<OpenAiRequest> DecodeOpenAiRequest(OpenAiEndpoint endpoint, absl::string_view body) {
  rapidjson::Document doc;
  if (absl::Status parsed = ParseBody(body, doc); !parsed.ok()) return parsed;
  OpenAiRequest request;
  request.endpoint = endpoint;
  const Json* model = Member(doc, "model");
  if (model == nullptr || !model->IsString()) return Bad("model", "'model' (string) is required");
  request.model.assign(model->GetString(), model->GetStringLength());
  request.call = DecodeCall(endpoint, doc, request);
  return request;
}

std::string OpenAiErrorParam(const absl::Status& status) { return RequestField(status); }

std::string ValidUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t n = Utf8SequenceLength(text);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for one bad byte
      text.remove_prefix(1);
    } else {
      out.append(text.data(), n);
      text.remove_prefix(n);
    }
  }
  return out;
}

OpenAiResponseHead NewOpenAiResponseHead(OpenAiEndpoint endpoint, std::string model) {
  thread_local std::mt19937_64 random(std::random_device{}());
  OpenAiResponseHead head;
  head.endpoint = endpoint;
  head.id = absl::StrFormat("%s-%016x%08x", endpoint == OpenAiEndpoint::kChat ? "chatcmpl" : "cmpl", random(),
                            static_cast<uint32_t>(random()));
  head.model = std::move(model);
  head.created = absl::ToUnixSeconds(absl::Now());
  return head;
}

const char* OpenAiFinishReason(FinishReason finish) { return finish == FinishReason::kLength ? "length" : "stop"; }

std::string EncodeOpenAiResponse(const OpenAiResponseHead& head, absl::string_view text,
                                 const GenerationSummary& summary) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  Head(w, head, IsChat(head) ? "chat.completion" : "text_completion");
  w.Key("choices");
  w.StartArray();
  w.StartObject();
  w.Key("index");
  w.Int(0);
  if (IsChat(head)) {
    w.Key("message");
    w.StartObject();
    w.Key("role");
    w.String("assistant");
    w.Key("content");
    String(w, text);
    w.EndObject();
  } else {
    w.Key("text");
    String(w, text);
  }
  w.Key("logprobs");
  w.Null();
  w.Key("finish_reason");
  w.String(OpenAiFinishReason(summary.finish));
  w.EndObject();
  w.EndArray();
  Usage(w, summary);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string EncodeOpenAiRoleChunk(const OpenAiResponseHead& head) { return Chunk(head, "assistant", "", nullptr); }

std::string EncodeOpenAiTextChunk(const OpenAiResponseHead& head, absl::string_view text) {
  return Chunk(head, nullptr, text, nullptr);
}

std::string EncodeOpenAiFinishChunk(const OpenAiResponseHead& head, FinishReason finish) {
  return Chunk(head, nullptr, IsChat(head) ? std::nullopt : std::optional<absl::string_view>(""),
               OpenAiFinishReason(finish));
}

std::string EncodeOpenAiUsageChunk(const OpenAiResponseHead& head, const GenerationSummary& summary) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  Head(w, head, ChunkObject(head));
  w.Key("choices");
  w.StartArray();
  w.EndArray();
  Usage(w, summary);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string SseEvent(absl::string_view json) { return absl::StrCat("data: ", json, "\n\n"); }

const char* OpenAiErrorType(int http_status) {
  if (http_status == 401 || http_status == 403) return "authentication_error";
  if (http_status == 429) return "rate_limit_error";
  if (http_status >= 500) return "server_error";
  return "invalid_request_error";
}

std::string OpenAiErrorJson(const absl::Status& status, absl::string_view code) {
  const std::string param = OpenAiErrorParam(status);
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("message");
  String(w, status.message());
  w.Key("type");
  w.String(OpenAiErrorType(HttpStatusFor(status)));
  w.Key("param");
  if (param.empty()) {
    w.Null();
  } else {
    String(w, param);
  }
  w.Key("code");
  if (code.empty()) {
    w.Null();
  } else {
    String(w, code);
  }
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string EncodeOpenAiModelList(const std::vector<OpenAiModelCard>& models, int64_t created) {
  return EncodeList(
      models.size(),
      [&](Writer& w, size_t i) {
        const OpenAiModelCard& model = models[i];
        w.Key("id");
        String(w, model.id);
        w.Key("object");
        w.String("model");
        w.Key("created");
        w.Int64(created);
        w.Key("owned_by");
        w.String("sluice");
        for (const auto& [key, value] : {std::pair<const char*, int64_t>{"max_model_len", model.max_model_len},
                                         {"vocab_size", model.vocab_size},
                                         {"max_prompt_tokens", model.max_prompt_tokens}}) {
          if (value <= 0) continue;
          w.Key(key);
          w.Int64(value);
        }
      },
      [](Writer&) {});
}

absl::StatusOr<OpenAiEmbeddingRequest> DecodeOpenAiEmbeddingRequest(absl::string_view body) {
  rapidjson::Document doc;
  if (absl::Status parsed = ParseBody(body, doc); !parsed.ok()) return parsed;
  OpenAiEmbeddingRequest request;
  const Json* model = Member(doc, "model");
  if (model == nullptr || !model->IsString()) return Bad("model", "'model' (string) is required");
  request.model.assign(model->GetString(), model->GetStringLength());
  request.call = DecodeEmbeddingCall(doc, request);
  return request;
}

std::string EncodeOpenAiEmbeddingResponse(absl::string_view model, const EmbeddingResult& result, bool base64) {
  static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32 bytes");
  return EncodeList(
      result.vectors.size(),
      [&](Writer& w, size_t i) {
        const std::vector<float>& vector = result.vectors[i];
        w.Key("object");
        w.String("embedding");
        w.Key("index");
        w.Uint64(i);
        w.Key("embedding");
        if (base64) {
          const std::string encoded = absl::Base64Escape(absl::string_view(
              reinterpret_cast<const char*>(vector.data()), vector.size() * sizeof(float)));
          w.String(encoded.data(), static_cast<rapidjson::SizeType>(encoded.size()));
        } else {
          w.StartArray();
          for (float value : vector) w.Double(value);
          w.EndArray();
        }
      },
      [&](Writer& w) {
        w.Key("model");
        String(w, model);
        Usage(w, result.prompt_tokens, std::nullopt);
      });
}

}  // namespace sluice
