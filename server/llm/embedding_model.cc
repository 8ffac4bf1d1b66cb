#include "server/llm/embedding_model.h"

#include <cstring>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "backend/base/status_mapping.h"
#include "backend/base/sync.h"

namespace sluice {
namespace {

// Calls waiting for (or in) tokenizing per model; more are refused ResourceExhausted (429), as the batcher's queue.
constexpr int kMaxPreparing = 256;

// Collects one call's rows as the scheduler answers them (any order, any thread) and answers the call once, when
// the last row is in: its vectors in input order, or the first failing row's status.
class RowGather {
 public:
  RowGather(size_t rows, int64_t prompt_tokens, EmbeddingCompletion done)
      : remaining_(rows), done_(std::move(done)) {
    result_.vectors.resize(rows);
    result_.prompt_tokens = prompt_tokens;
  }

  void Row(size_t index, absl::StatusOr<InferResult> row) {
    EmbeddingCompletion done;
    absl::StatusOr<EmbeddingResult> answer = absl::UnknownError("unanswered");
    {
      MutexLock lock(&mu_);
      if (!row.ok()) {
        if (error_.ok()) error_ = row.status();
      } else {
        std::span<const float> values = row->outputs.front().tensor.values<float>();
        result_.vectors[index].assign(values.begin(), values.end());
      }
      if (--remaining_ > 0) return;
      done = std::move(done_);
      answer = error_.ok() ? absl::StatusOr<EmbeddingResult>(std::move(result_)) : error_;
    }
    done(std::move(answer));  // outside mu_: the sink answers the client
  }

 private:
  Mutex mu_;
  size_t remaining_ ABSL_GUARDED_BY(mu_);
  EmbeddingResult result_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  EmbeddingCompletion done_ ABSL_GUARDED_BY(mu_);
};

absl::Status Withdrawn() { return absl::CancelledError("the embedding call was withdrawn (the client went away)"); }

}  // namespace

// One call's withdrawal: the flag its client's disconnect sets and the handles of the rows submitted so far.
// Thread-safety: any thread; mu_ is a leaf, never held while a row is cancelled (that may answer rows at once).
class EmbeddingWithdrawal {
 public:
  void Cancel() {
    std::vector<InferHandle> rows;
    {
      MutexLock lock(&mu_);
      cancelled_ = true;
      rows = rows_;
    }
    for (const InferHandle& row : rows) row.Cancel();
  }
  bool cancelled() {
    MutexLock lock(&mu_);
    return cancelled_;
  }
  // Keeps a submitted row's handle; cancels the row at once when the call was withdrawn while it was submitted.
  void Add(InferHandle row) {
    bool cancelled = false;
    {
      MutexLock lock(&mu_);
      rows_.push_back(row);
      cancelled = cancelled_;
    }
    if (cancelled) row.Cancel();
  }

 private:
  Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<InferHandle> rows_ ABSL_GUARDED_BY(mu_);
};

void EmbeddingHandle::Cancel() const {
  if (withdrawal_) withdrawal_->Cancel();
}

namespace {

// A refusal of the request's `input` (the field OpenAI's error object names).
absl::Status BadInput(const std::string& message) {
  return WithRequestField(absl::InvalidArgumentError(message), "input");
}

// One input as a KServe-style row: the ids as INT64 [1, n], the embedding output requested.
InferCall RowCall(const ModelConfig& config, const std::vector<int32_t>& ids) {
  InferCall call;
  std::string& bytes = call.storage.emplace_back(ids.size() * sizeof(int64_t), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    std::memcpy(bytes.data() + i * sizeof(int64_t), &id, sizeof id);  // little-endian host, as the wire format
  }
  call.inputs.push_back(WireTensor{config.inputs.front().name, "INT64", {1, static_cast<int64_t>(ids.size())}, bytes});
  call.requested_outputs.push_back(config.embedding->output);
  return call;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddingModel>> EmbeddingModel::Create(ServedModel* served) {
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tokenizer =
      HfTokenizer::Load(served->config().embedding->tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  return std::unique_ptr<EmbeddingModel>(new EmbeddingModel(served, *std::move(tokenizer)));
}

EmbeddingModel::EmbeddingModel(ServedModel* served, std::unique_ptr<HfTokenizer> tokenizer)
    : served_(served), tokenizer_(std::move(tokenizer)), prep_(kMaxPreparing) {}

EmbeddingHandle EmbeddingModel::Embed(absl::StatusOr<EmbeddingCall> call, EmbeddingCompletion done) {
  if (!call.ok()) {
    done(call.status());
    return {};
  }
  if (call->texts.empty()) {
    done(absl::InvalidArgumentError("input must not be empty"));
    return {};
  }
  auto withdrawal = std::make_shared<EmbeddingWithdrawal>();
  // The job owns the call and `done` until it runs; when it is not taken they are still here to refuse with.
  auto owned = std::make_shared<std::pair<EmbeddingCall, EmbeddingCompletion>>(*std::move(call), std::move(done));
  if (!prep_.TrySubmit([this, owned, withdrawal] {
        Prepare(std::move(owned->first), std::move(owned->second), *withdrawal);
      })) {
    owned->second(absl::ResourceExhaustedError(
        absl::StrCat("model '", config().name, "': too many embedding requests are waiting to be tokenized")));
    return {};
  }
  return EmbeddingHandle(std::move(withdrawal));
}

void EmbeddingModel::Prepare(EmbeddingCall call, EmbeddingCompletion done, EmbeddingWithdrawal& withdrawal) {
  if (withdrawal.cancelled()) return done(Withdrawn());  // gone while waiting: not worth tokenizing
  const int64_t limit = config().max_length();
  std::vector<std::vector<int32_t>> rows;
  rows.reserve(call.texts.size());
  int64_t tokens = 0;
  for (size_t i = 0; i < call.texts.size(); ++i) {
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->TokenizeWithPostProcessor(call.texts[i]);
    if (!ids.ok()) return done(BadInput(absl::StrCat("input[", i, "]: ", ids.status().message())));
    const int64_t count = static_cast<int64_t>(ids->size());
    if (count == 0) return done(BadInput(absl::StrCat("input[", i, "] has no tokens")));
    if (count > limit) {
      return done(BadInput(absl::StrCat("input[", i, "] is ", count, " tokens; model '", config().name,
                                        "' takes at most ", limit,
                                        " tokens per input (its largest length bucket; inputs are not truncated)")));
    }
    tokens += count;
    rows.push_back(*std::move(ids));
  }
  auto gather = std::make_shared<RowGather>(rows.size(), tokens, std::move(done));
  // Every row is queued before any is waited for: the batcher sees them together and batches them by bucket.
  for (size_t i = 0; i < rows.size(); ++i) {
    if (withdrawal.cancelled()) {
      gather->Row(i, Withdrawn());  // never submitted: answered here, so the call still answers once
      continue;
    }
    withdrawal.Add(served_->Infer(RowCall(config(), rows[i]),
                                  [gather, i](absl::StatusOr<InferResult> row) { gather->Row(i, std::move(row)); }));
  }
}

}  // namespace sluice
