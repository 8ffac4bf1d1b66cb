#include "server/voice/stream_engine.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sluice::voice {

absl::StatusOr<std::unique_ptr<StreamEngine>> StreamEngine::Create(const StreamEngineOptions& options) {
  if (options.config == nullptr || options.backend == nullptr || !options.config->speech) {
    return absl::InvalidArgumentError("StreamEngine needs a speech model and its stream-step backend");
  }
  return std::unique_ptr<StreamEngine>(new StreamEngine(options));
}

namespace {

absl::Duration MaxWait(const ModelConfig& config, const StreamStepOptions& step) {
  if (step.max_wait_ms >= 0) return absl::Milliseconds(step.max_wait_ms);
  const int rate = config.inputs.front().sample_rate.value_or(16000);
  return absl::Seconds(static_cast<double>(step.chunk_samples) / rate / 4);
}

}  // namespace

StreamEngine::StreamEngine(const StreamEngineOptions& options)
    : config_(options.config), step_(options.backend->options()), backend_(options.backend),
      stats_(options.stats), metrics_(options.metrics), max_wait_(MaxWait(*options.config, step_)),
      held_(step_.slots, false), running_(step_.slots, false),
      thread_([this] { StepLoop(); }) {}

StreamEngine::~StreamEngine() { Stop(); }

void StreamEngine::Stop() {
  std::deque<Pending> left;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    work_.SignalAll();
  }
  std::call_once(joined_, [this] { thread_.join(); });
  {
    MutexLock lock(&mu_);
    left.swap(pending_);
  }
  for (Pending& p : left) p.done(absl::CancelledError("the stream engine stopped"));
}

absl::StatusOr<int> StreamEngine::AcquireSlot() {
  MutexLock lock(&mu_);
  for (int slot = 0; slot < step_.slots; ++slot) {
    if (!held_[slot] && !running_[slot]) {
      held_[slot] = true;
      ++held_count_;
      return slot;
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat("model '", config_->name, "': all ", step_.slots,
                                                   " stream slots are in use (speech.stream_step.slots); retry "
                                                   "when a stream ends"));
}

void StreamEngine::Submit(int slot, std::vector<float> samples, bool reset, ChunkDone done) {
  absl::Status refused;
  {
    MutexLock lock(&mu_);
    if (slot < 0 || slot >= step_.slots || !held_[slot] || running_[slot] ||
        std::any_of(pending_.begin(), pending_.end(), [slot](const Pending& p) { return p.slot == slot; })) {
      refused = absl::InvalidArgumentError(absl::StrCat("stream slot ", slot, " is not held or has a chunk queued"));
    } else if (samples.empty() || static_cast<int64_t>(samples.size()) > step_.chunk_samples) {
      refused = absl::InvalidArgumentError(
          absl::StrCat("a stream chunk holds 1..", step_.chunk_samples, " samples, got ", samples.size()));
    } else if (stop_) {
      refused = absl::CancelledError("the stream engine stopped");
    } else {
      pending_.push_back(Pending{slot, reset, std::move(samples), std::move(done), absl::Now()});
      work_.SignalAll();
      return;
    }
  }
  done(refused);
}

void StreamEngine::ReleaseSlot(int slot) {
  std::optional<Pending> dropped;
  {
    MutexLock lock(&mu_);
    if (slot < 0 || slot >= step_.slots || !held_[slot]) return;
    held_[slot] = false;
    --held_count_;
    auto it = std::find_if(pending_.begin(), pending_.end(), [slot](const Pending& p) { return p.slot == slot; });
    if (it != pending_.end()) {
      dropped = std::move(*it);
      pending_.erase(it);
    }
    work_.SignalAll();  // the tick may have been waiting for this stream's chunk
  }
  if (dropped) dropped->done(absl::CancelledError("the stream ended before its chunk ran"));
}

StreamEngine::Counters StreamEngine::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

int StreamEngine::BatchSizeFor(int rows) const {
  for (int b : step_.batch_sizes) {
    if (b >= rows) return b;
  }
  return step_.batch_sizes.back();
}

std::vector<StreamEngine::Pending> StreamEngine::NextStep() {
  MutexLock lock(&mu_);
  while (!stop_ && pending_.empty()) work_.Wait(&mu_);
  // The tick: every stream holding a slot has its chunk here, or the oldest has waited long enough.
  while (!stop_ && static_cast<int>(pending_.size()) < held_count_) {
    const absl::Time until = pending_.front().queued + max_wait_;
    if (absl::Now() >= until) break;
    work_.WaitUntil(&mu_, until);
    if (pending_.empty()) return {};  // every waiting stream left: start over
  }
  std::vector<Pending> rows;
  if (stop_) return rows;
  const size_t take = std::min<size_t>(pending_.size(), step_.batch_sizes.back());
  for (size_t i = 0; i < take; ++i) {
    running_[pending_.front().slot] = true;
    rows.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  return rows;
}

void StreamEngine::StepLoop() {
  while (true) {
    std::vector<Pending> rows = NextStep();
    if (rows.empty()) {
      MutexLock lock(&mu_);
      if (stop_) return;
      continue;
    }
    RunStep(std::move(rows));
  }
}

void StreamEngine::RunStep(std::vector<Pending> rows) {
  const int batch_size = BatchSizeFor(static_cast<int>(rows.size()));
  StreamStepInput input{.batch_size = batch_size, .rows = {}};
  for (const Pending& p : rows) input.rows.push_back(StreamStepRow{p.slot, p.reset, p.samples});
  const absl::Time started = absl::Now();
  absl::StatusOr<StreamStepOutput> output = backend_->Step(input);
  const absl::Time finished = absl::Now();
  {
    MutexLock lock(&mu_);
    for (const Pending& p : rows) {
      running_[p.slot] = false;
    }
    ++counters_.steps;
    counters_.rows += static_cast<int64_t>(rows.size());
  }
  const int rate = config_->inputs.front().sample_rate.value_or(16000);
  if (metrics_ && output.ok()) {
    metrics_->RecordComputed(*config_, VoiceApi::kStreaming,
                             static_cast<double>(rows.size() * step_.chunk_samples) / rate);
  }
  const int64_t frame_samples = config_->speech->frame_samples;
  for (size_t r = 0; r < rows.size(); ++r) {
    Pending& p = rows[r];
    if (stats_) {
      InferResponse response;
      response.status = output.status();
      response.queue_time = started - p.queued;
      response.compute_time = finished - started;
      response.batch_size = batch_size;
      response.batch_rows_used = static_cast<int>(rows.size());
      response.bucket_length = step_.chunk_samples;
      stats_->RecordRow(response, finished - p.queued);
    }
    if (!output.ok()) {
      p.done(output.status());
      continue;
    }
    const int64_t frames = (static_cast<int64_t>(p.samples.size()) + frame_samples - 1) / frame_samples;
    const float* row = output->values.data() + r * output->frames * output->classes;
    p.done(WindowLogProbs{.values = std::vector<float>(row, row + frames * output->classes),
                          .frames = frames,
                          .classes = output->classes});
  }
}

}  // namespace sluice::voice
