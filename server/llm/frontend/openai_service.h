// The OpenAI-compatible routes' handlers (registered in the HTTP route table, server/kserve/http_service.cc):
// POST /v1/completions, POST /v1/chat/completions, POST /v1/embeddings and GET /v1/models. A handler decodes the body
// (openai_codec.h), finds the generation model and calls GenerationModel::Generate — the one generation request
// path — with a sink that either collects the whole response or writes Server-Sent Events onto the exchange's
// HttpStream: chat's role chunk, text chunks, the finish chunk, the usage chunk (stream_options.include_usage)
// and "data: [DONE]". Refusals are answered with OpenAI's error object and the status of the shared status table
// (400, 404, 429 with Retry-After, 503); an error after the stream started is an SSE error event, then [DONE].
// Backpressure: above a high-water mark of unsent bytes, text is held (and merged into one chunk) until the
// stream drains. A client that goes away (OnClientGone, or a failed write) cancels its generation at once.
// Every outcome, a malformed body naming its model included, is answered by the model through the sink (one error
// path); only a body naming no model, or an unknown model, is answered here.
// Thread-safety: handlers run on HTTP event-loop threads and never wait (tokenizing is on the prep arena); sinks
// run on the handler's thread (a refusal made at once), a prep-arena thread or an engine thread; each sink
// serializes its own writes with a mutex and calls nothing that calls back into it while holding it.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "server/http/http_exchange.h"
#include "server/llm/frontend/openai_codec.h"
#include "server/hub/model_hub.h"

namespace sluice {

// POST /v1/completions (kCompletions) and /v1/chat/completions (kChat).
void ServeOpenAiGeneration(ModelHub& hub, OpenAiEndpoint endpoint, const HttpRequest& request,
                           const std::shared_ptr<HttpExchange>& exchange);

// POST /v1/embeddings: EmbeddingModel::Embed (embedding_model.h) and the vectors in OpenAI's shape. `dimensions`
// other than the model's own size is refused (400 naming it); a model without an embedding: section is 404.
void ServeOpenAiEmbeddings(ModelHub& hub, const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);

// GET /v1/models: the generation and embedding models (Unavailable while loading).
void ServeOpenAiModels(ModelHub& hub, const std::shared_ptr<HttpExchange>& exchange);

// An error in OpenAI's shape with the status table's HTTP status (429 adds Retry-After). `code` as in
// OpenAiErrorJson.
void SendOpenAiError(HttpExchange& exchange, const absl::Status& status, absl::string_view code = {});

}  // namespace sluice
