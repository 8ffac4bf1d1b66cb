// A `kind: text` model with an `embedding:` section (backend/base/embedding_config.h) served as text in, vectors
// out: the OpenAI embeddings API's one entry point. It tokenizes each input with the model's tokenizer.json (its
// post-processor's template added, as sentence-transformers encodes), refuses inputs longer than the largest length
// bucket by name, and submits every input of a call at once as its own row through ServedModel::Infer — the one
// batched request path (validation, statistics, draining) — so the dynamic batcher pads each to its length bucket
// and batches rows of this and other calls together. The answer keeps the inputs' order.
// A client that goes away withdraws its call (EmbeddingHandle::Cancel, as KServe's HTTP path withdraws an infer):
// rows still queued leave the queue, a call not yet tokenized is never tokenized, and the call answers CANCELLED.
// Thread-safety: Embed may be called from any thread at once; tokenizing runs on the process-wide prep arena
// (prep_queue.h), never on the caller's (HTTP event-loop) thread. `done` is called exactly once: on the caller's
// thread when the prep queue is full, on a prep-arena thread for a refusal found while tokenizing or at submission
// (or a call withdrawn before it was tokenized), on the thread calling Cancel when that withdraws the last
// unanswered rows, else on the scheduler thread that answers the last row. Immutable after Create.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/served_model.h"
#include "server/llm/embedding_call.h"
#include "server/llm/hf_tokenizers/hf_tokenizer.h"
#include "server/llm/prep_queue.h"

namespace sluice {

class EmbeddingWithdrawal;  // embedding_model.cc

// A front end's hold on an accepted Embed call, to withdraw it when the client goes. Empty (Cancel does nothing)
// when the call was refused at once. Copyable; Cancel may be called from any thread, any number of times, before
// or after the answer: rows already running finish, the rest answer CANCELLED, and so does the call.
class EmbeddingHandle {
 public:
  EmbeddingHandle() = default;
  explicit EmbeddingHandle(std::shared_ptr<EmbeddingWithdrawal> withdrawal) : withdrawal_(std::move(withdrawal)) {}
  void Cancel() const;

 private:
  std::shared_ptr<EmbeddingWithdrawal> withdrawal_;
};

class EmbeddingModel {
 public:
  // Loads the config's tokenizer. REQUIRES: served->config().embedding is set; `served` outlives the model.
  static absl::StatusOr<std::unique_ptr<EmbeddingModel>> Create(ServedModel* served);
  EmbeddingModel(const EmbeddingModel&) = delete;
  EmbeddingModel& operator=(const EmbeddingModel&) = delete;
  ~EmbeddingModel() = default;  // the prep queue's destructor waits for its jobs

  const ModelConfig& config() const { return served_->config(); }
  // The vector size (the embedding output's one dimension).
  int64_t dimensions() const { return config().embedding_output().shape.front(); }

  // Refusals: the call's own error (a decode error passed in); InvalidArgument naming the input (index) that is not
  // tokenizable or has more tokens than the largest length bucket (the limit named); ResourceExhausted when too
  // many calls wait to be tokenized; whatever ServedModel::Infer answers a row (draining, queue full), the first
  // failing row's status for the whole call; Cancelled once the handle withdrew the call.
  EmbeddingHandle Embed(absl::StatusOr<EmbeddingCall> call, EmbeddingCompletion done);
  // Returns once every call taken so far has been tokenized and its rows submitted (or refused): ModelHub::StopAll
  // calls it before stopping the schedulers, so that an accepted call's rows are queued and answered.
  void WaitForSubmitted() { prep_.WaitIdle(); }

 private:
  EmbeddingModel(ServedModel* served, std::unique_ptr<HfTokenizer> tokenizer);
  // On the prep arena: tokenizes, checks lengths, submits every row (none once `withdrawal` is cancelled).
  void Prepare(EmbeddingCall call, EmbeddingCompletion done, EmbeddingWithdrawal& withdrawal);

  ServedModel* const served_;
  const std::unique_ptr<HfTokenizer> tokenizer_;
  PrepQueue prep_;  // last: destroyed first, so no job outlives what it uses
};

}  // namespace sluice
