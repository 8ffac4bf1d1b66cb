#include "server/llm/frontend/openai_service.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backend/base/status_mapping.h"
#include "backend/base/sync.h"

namespace sluice {
namespace {

// Unsent stream bytes above which text is held back, and the level at which it is sent again.
constexpr size_t kHighWater = 64 << 10;
constexpr size_t kLowWater = 16 << 10;

// What both sinks share: the exchange, the response head and the withdrawal of the call when the client goes.
class OpenAiSink : public GenerationSink {
 public:
  OpenAiSink(std::shared_ptr<HttpExchange> exchange, OpenAiResponseHead head)
      : exchange_(std::move(exchange)), head_(std::move(head)) {}

  // Generate returned (an empty handle: refused, OnDone already called): a client already gone withdraws it.
  void Accepted(GenerationHandle handle) {
    bool gone = false;
    {
      MutexLock lock(&mu_);
      handle_ = handle;
      gone = client_gone_;
    }
    if (gone) handle.Cancel();  // may call OnDone on this thread: no lock held
  }

  // The exchange's OnClientGone: frees the call's KV slot now rather than at its next token.
  void ClientGone() {
    GenerationHandle handle;
    {
      MutexLock lock(&mu_);
      client_gone_ = true;
      handle = handle_;
    }
    handle.Cancel();
  }

 protected:
  const std::shared_ptr<HttpExchange> exchange_;
  const OpenAiResponseHead head_;
  Mutex mu_;

 private:
  GenerationHandle handle_ ABSL_GUARDED_BY(mu_);
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
};

// stream: false — the text is collected and answered whole when the call is done.
class WholeResponseSink final : public OpenAiSink {
 public:
  using OpenAiSink::OpenAiSink;

  bool OnDelta(const GenerationDelta& delta) override {
    MutexLock lock(&mu_);
    text_ += delta.text;
    return !exchange_->client_gone();
  }

  void OnDone(const GenerationSummary& summary) override {
    std::string text;
    {
      MutexLock lock(&mu_);
      text = std::move(text_);
    }
    if (!summary.status.ok()) return SendOpenAiError(*exchange_, summary.status);
    HttpResponse response;
    response.body = EncodeOpenAiResponse(head_, text, summary);
    exchange_->Respond(std::move(response));
  }

 private:
  std::string text_ ABSL_GUARDED_BY(mu_);
};

// stream: true — Server-Sent Events. The stream (status 200) starts with the first delta, so that a call that
// fails before producing anything still gets its own HTTP status. HttpStream calls only queue onto the
// connection's strand (no callbacks run inside them), so they are made under mu_ to keep the events in order.
class StreamSink final : public OpenAiSink, public std::enable_shared_from_this<StreamSink> {
 public:
  StreamSink(std::shared_ptr<HttpExchange> exchange, OpenAiResponseHead head, bool include_usage)
      : OpenAiSink(std::move(exchange), std::move(head)), include_usage_(include_usage) {}

  bool OnDelta(const GenerationDelta& delta) override {
    bool arm = false;
    std::shared_ptr<HttpStream> stream;
    {
      MutexLock lock(&mu_);
      StartLocked();
      pending_ += delta.text;
      if (broken_) return false;
      if (waiting_) return true;
      if (stream_->buffered_bytes() > kHighWater) {
        waiting_ = arm = true;
        stream = stream_;
      } else if (!FlushLocked()) {
        return false;
      }
    }
    // Outside mu_: OnWritable may run the callback at once on this thread.
    if (arm) stream->OnWritable(kLowWater, [self = shared_from_this()] { self->Writable(); });
    return true;
  }

  void OnDone(const GenerationSummary& summary) override {
    MutexLock lock(&mu_);
    if (!started_ && !summary.status.ok()) return SendOpenAiError(*exchange_, summary.status);
    StartLocked();
    FlushLocked();
    if (summary.status.ok()) {
      stream_->Write(SseEvent(EncodeOpenAiFinishChunk(head_, summary.finish)));
      if (include_usage_) stream_->Write(SseEvent(EncodeOpenAiUsageChunk(head_, summary)));
    } else if (!exchange_->client_gone()) {
      stream_->Write(SseEvent(OpenAiErrorJson(summary.status)));
    }
    stream_->Write(std::string(kSseDone));
    stream_->Close();
    done_ = true;
  }

 private:
  void Writable() {
    MutexLock lock(&mu_);
    waiting_ = false;
    if (!done_) FlushLocked();  // OnDone flushed everything itself
  }

  void StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (started_) return;
    started_ = true;
    stream_ = exchange_->StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    if (head_.endpoint == OpenAiEndpoint::kChat && !stream_->Write(SseEvent(EncodeOpenAiRoleChunk(head_)))) {
      broken_ = true;
    }
  }

  // Sends the held text as one chunk. False (and broken_) when the client is gone.
  bool FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!pending_.empty() && !broken_) {
      broken_ = !stream_->Write(SseEvent(EncodeOpenAiTextChunk(head_, pending_)));
    }
    pending_.clear();
    return !broken_;
  }

  const bool include_usage_;
  std::shared_ptr<HttpStream> stream_ ABSL_GUARDED_BY(mu_);
  std::string pending_ ABSL_GUARDED_BY(mu_);  // text not yet sent (held while the stream is above high water)
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;  // an OnWritable callback is armed
  bool broken_ ABSL_GUARDED_BY(mu_) = false;   // a write failed: the client is gone
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

void SendOpenAiError(HttpExchange& exchange, const absl::Status& status, absl::string_view code) {
  HttpResponse response;
  response.status = HttpStatusFor(status);
  if (status.code() == absl::StatusCode::kResourceExhausted) response.headers.emplace_back("Retry-After", "1");
  response.body = OpenAiErrorJson(status, code);
  exchange.Respond(std::move(response));
}

void ServeOpenAiGeneration(ModelHub& hub, OpenAiEndpoint endpoint, const HttpRequest& request,
                           const std::shared_ptr<HttpExchange>& exchange) {
  absl::StatusOr<OpenAiRequest> decoded = DecodeOpenAiRequest(endpoint, request.body);
  if (!decoded.ok()) return SendOpenAiError(*exchange, decoded.status());
  absl::StatusOr<GenerationModel*> model = hub.FindGeneration(decoded->model);
  if (!model.ok()) {
    return SendOpenAiError(*exchange, model.status(), absl::IsNotFound(model.status()) ? "model_not_found" : "");
  }
  OpenAiResponseHead head = NewOpenAiResponseHead(endpoint, decoded->model);
  std::shared_ptr<OpenAiSink> sink;
  if (decoded->stream) {
    sink = std::make_shared<StreamSink>(exchange, std::move(head), decoded->include_usage);
  } else {
    sink = std::make_shared<WholeResponseSink>(exchange, std::move(head));
  }
  // Weak: the exchange keeps its callback, and the sink keeps the exchange.
  exchange->OnClientGone([weak = std::weak_ptr<OpenAiSink>(sink)] {
    if (std::shared_ptr<OpenAiSink> sink = weak.lock()) sink->ClientGone();
  });
  // One path from here: the model answers every outcome, a malformed call included, through the sink.
  sink->Accepted((*model)->Generate(std::move(decoded->call), sink));
}

void ServeOpenAiEmbeddings(ModelHub& hub, const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange) {
  absl::StatusOr<OpenAiEmbeddingRequest> decoded = DecodeOpenAiEmbeddingRequest(request.body);
  if (!decoded.ok()) return SendOpenAiError(*exchange, decoded.status());
  absl::StatusOr<EmbeddingModel*> model = hub.FindEmbedding(decoded->model);
  if (!model.ok()) {
    return SendOpenAiError(*exchange, model.status(), absl::IsNotFound(model.status()) ? "model_not_found" : "");
  }
  if (decoded->dimensions && *decoded->dimensions != (*model)->dimensions()) {
    return SendOpenAiError(*exchange, WithRequestField(absl::InvalidArgumentError(absl::StrCat(
                                          "'dimensions' ", *decoded->dimensions, " is not supported: model '",
                                          decoded->model, "' answers ", (*model)->dimensions(),
                                          "-dimensional embeddings only")),
                                      "dimensions"));
  }
  auto answer = [exchange, name = decoded->model, base64 = decoded->base64](absl::StatusOr<EmbeddingResult> result) {
    if (!result.ok()) return SendOpenAiError(*exchange, result.status());
    for (const std::vector<float>& vector : result->vectors) {
      for (float value : vector) {
        // JSON has no NaN or infinity; a model that makes them is broken, not the request.
        if (!std::isfinite(value)) {
          return SendOpenAiError(*exchange, absl::InternalError("the model produced a non-finite embedding"));
        }
      }
    }
    HttpResponse response;
    response.body = EncodeOpenAiEmbeddingResponse(name, *result, base64);
    exchange->Respond(std::move(response));
  };
  EmbeddingHandle handle = (*model)->Embed(std::move(decoded->call), std::move(answer));
  // As KServe's HTTP infer: a client that leaves withdraws the call's queued rows (at once if it already left).
  exchange->OnClientGone([handle] { handle.Cancel(); });
}

void ServeOpenAiModels(ModelHub& hub, const std::shared_ptr<HttpExchange>& exchange) {
  static const int64_t created = absl::ToUnixSeconds(absl::Now());  // first asked: about when the server started
  // While the models load, an empty list would read as "this server has no models": say it is not ready instead.
  if (!hub.draining() && !hub.ready()) {
    SendOpenAiError(*exchange, absl::UnavailableError("the server is loading its models; not ready yet"));
    return;
  }
  std::vector<OpenAiModelCard> models;
  for (const auto& model : hub.generation_models()) {
    const ModelConfig& config = model->config();
    OpenAiModelCard& card = models.emplace_back();
    card.id = config.name;
    if (config.generation) {
      card.max_model_len = config.generation->context_length;
      card.vocab_size = config.generation->vocab_size;
      card.max_prompt_tokens = config.generation->max_prompt_length();
    }
  }
  for (const auto& model : hub.embedding_models()) {
    OpenAiModelCard& card = models.emplace_back();
    card.id = model->config().name;
    card.max_prompt_tokens = model->config().max_length();  // the most tokens one input may have
  }
  HttpResponse response;
  response.body = EncodeOpenAiModelList(models, created);
  exchange->Respond(std::move(response));
}

}  // namespace sluice
