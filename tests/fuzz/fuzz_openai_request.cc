// Fuzzes the OpenAI front end's request decoding on arbitrary bytes: every input is decoded as a completions body and
// as a chat body (DecodeOpenAiRequest, server/llm/frontend/openai_codec.h), then what the front end writes back about it (an
// error JSON, or a response and stream chunks naming the request's model) is encoded and parsed again.
// Asserts beyond "no crash, no ASan/UBSan report":
//   - a refusal is InvalidArgument; a decoded completions call has exactly one of prompt / prompt_ids and no
//     messages, a decoded chat call has messages only, each with role system, user or assistant;
//   - the sampling defaults hold (top_k >= 0 after vLLM's -1), stream_options only with a decoded object;
//   - every encoded response, chunk and error is one well-formed JSON object, and a response names the model as
//     the request gave it.
#include <cstdint>
#include <string>

#include "rapidjson/document.h"
#include "server/llm/frontend/openai_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using sluice::OpenAiEndpoint;

rapidjson::Document ParseBack(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(json.data(), json.size());  // every body valid UTF-8
  FUZZ_CHECK(!doc.HasParseError() && doc.IsObject(), "encoded JSON parses back: " + json.substr(0, 200));
  return doc;
}

void Check(OpenAiEndpoint endpoint, const uint8_t* data, size_t size) {
  using namespace sluice;
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<OpenAiRequest> request = DecodeOpenAiRequest(endpoint, body);
  if (!request.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(request.status()), request.status().ToString());
    (void)OpenAiErrorParam(request.status());
    ParseBack(OpenAiErrorJson(request.status()));
    return;
  }
  FUZZ_CHECK(request->endpoint == endpoint, "endpoint");
  if (!request->call.ok()) {  // a body naming its model: the call's refusal, answered by the model
    FUZZ_CHECK(absl::IsInvalidArgument(request->call.status()), request->call.status().ToString());
    ParseBack(OpenAiErrorJson(request->call.status()));
    return;
  }
  const GenerationCall& call = *request->call;
  if (endpoint == OpenAiEndpoint::kCompletions) {
    FUZZ_CHECK(call.prompt.has_value() != call.prompt_ids.has_value(), "one of prompt / prompt_ids");
    FUZZ_CHECK(!call.messages.has_value(), "no messages on completions");
  } else {
    FUZZ_CHECK(call.messages.has_value() && !call.prompt && !call.prompt_ids, "messages only on chat");
    for (const ChatMessage& m : *call.messages) {
      FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant", m.role);
    }
  }
  FUZZ_CHECK(call.sampling.top_k >= 0 || call.sampling.top_k < -1, "vLLM's -1 becomes 0");

  OpenAiResponseHead head = NewOpenAiResponseHead(endpoint, request->model);
  GenerationSummary summary;
  summary.prompt_tokens = 3;
  summary.completion_tokens = 2;
  const std::string text = call.stop.empty() ? std::string("ok") : call.stop.front();
  rapidjson::Document response = ParseBack(EncodeOpenAiResponse(head, text, summary));
  FUZZ_CHECK(response.HasMember("model") && response["model"].IsString() &&
                 std::string(response["model"].GetString(), response["model"].GetStringLength()) ==
                     ValidUtf8(request->model),
             "the response names the request's model (invalid UTF-8 replaced)");
  ParseBack(EncodeOpenAiRoleChunk(head));
  ParseBack(EncodeOpenAiTextChunk(head, text));
  ParseBack(EncodeOpenAiFinishChunk(head, FinishReason::kLength));
  ParseBack(EncodeOpenAiUsageChunk(head, summary));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;  // the parse is linear; larger inputs only slow the search down
  Check(OpenAiEndpoint::kCompletions, data, size);
  Check(OpenAiEndpoint::kChat, data, size);
  return 0;
}
