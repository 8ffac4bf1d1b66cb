#include "loadtest/speech/stream_runner.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <queue>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "backend/base/sync.h"
#include "loadtest/core/progress_bar.h"
#include "loadtest/kserve/grpc_infer_client.h"
#include "spdlog/spdlog.h"

namespace sluice::loadtest {
namespace {

namespace riva = nvidia::riva::asr;
using Clock = StreamCall::Clock;

constexpr double kCancelWaitS = 30;  // after cancelling, how long the calls get to end

// One RunStreams. The caller's thread owns live_ and the counters; StreamCall callbacks (gRPC's threads) touch
// only the fields under mu_; the progress bar's thread reads mu_'s fields and the atomics.
class StreamRun {
 public:
  StreamRun(const RunOptions& options, const StreamingOptions& streaming, const Workload& workload,
            const ClientOptions& client)
      : options_(options),
        streaming_(streaming),
        workload_(workload),
        client_(client),
        measured_end_s_(options.duration_s > 0 ? options.warmup_s + options.duration_s : 1e300),
        cap_end_s_(options.max_duration_s),
        send_end_s_(std::min(measured_end_s_, cap_end_s_)) {
    for (const auto& channel : CreateLoadChannels(client)) {
      stubs_.push_back(riva::RivaSpeechRecognition::NewStub(channel));
    }
    result_.run.concurrency = streaming.streams;
  }

  absl::StatusOr<StreamRunResult> Run() {
    ProgressBar bar([this] { return ProgressLine(); }, options_.progress);
    absl::Status status = Drive();
    bar.Stop();
    if (!status.ok()) return status;
    result_.run.wall_s = Elapsed();
    result_.run.capped = result_.run.capped || absl::StrContains(result_.run.stop_reason, "cap");
    SetWindow();
    return std::move(result_);
  }

 private:
  struct Live {
    std::unique_ptr<StreamCall> call;
    RequestRecord record;
  };
  struct Due {
    double at_s;
    uint64_t id;
    bool operator>(const Due& other) const { return at_s > other.at_s; }
  };

  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  std::string ProgressLine() {
    const double t = Elapsed();
    int64_t done, errors;
    {
      MutexLock lock(&mu_);
      done = finished_total_;
      errors = errors_total_;
    }
    double fraction = options_.duration_s > 0 ? t / (options_.warmup_s + options_.duration_s) : 0;
    if (options_.requests > 0) {
      fraction = std::max(fraction, static_cast<double>(started_progress_.load()) /
                                        static_cast<double>(options_.requests + options_.warmup_requests));
    }
    return absl::StrFormat("%s %s %6.1fs  streams started %d  ended %d  err %d  active %d", options_.label,
                           ProgressBar::Bar(fraction, 24), t, started_progress_.load(), done, errors,
                           started_progress_.load() - done);
  }

  // Why no further stream starts, or "" to go on (as the runner's StopReason, with streams for requests).
  std::string StopReason(double now_s) const {
    if (options_.requests > 0 && measured_started_ >= options_.requests) return "requests";
    if (started_ >= options_.max_requests) return "max-requests cap";
    if (now_s < send_end_s_) return "";
    return now_s >= cap_end_s_ && cap_end_s_ < measured_end_s_ ? "max-duration cap" : "duration";
  }

  void StartStream() {
    const uint64_t index = options_.first_index + static_cast<uint64_t>(started_);
    PlannedRequest planned = workload_.Make(index);
    const ModelInfo& info = workload_.models()[planned.model].info;
    const std::string& raw = planned.call.inputs[0].raw;
    std::vector<float> samples(raw.size() / sizeof(float));
    std::memcpy(samples.data(), raw.data(), samples.size() * sizeof(float));

    Live live;
    live.record.index = index;
    live.record.model = planned.model;
    live.record.length = planned.length;
    live.record.scheduled_s = live.record.sent_s = Elapsed();
    live.record.measured = live.record.scheduled_s >= options_.warmup_s && started_ >= options_.warmup_requests;
    if (live.record.measured && measured_started_ == 0 && options_.on_measure_start) options_.on_measure_start();
    ++started_;
    started_progress_.store(started_);
    if (live.record.measured) ++measured_started_;
    if (samples.empty()) {  // not sent: an error of the client's own
      spdlog::error("stream {}: no audio to send", index);
      StreamOutcome outcome;
      outcome.code = static_cast<int>(grpc::StatusCode::INTERNAL);
      outcome.message = "no audio to send";
      live.record.done_s = live.record.sent_s;
      Record(live.record, std::move(outcome));
      return;
    }

    const uint64_t id = next_id_++;
    const double audio_s = static_cast<double>(samples.size()) / info.sample_rate;
    const double allowed_s = (streaming_.realtime ? audio_s : 0) + options_.timeout_ms / 1e3;
    latest_deadline_s_ = std::max(latest_deadline_s_, Elapsed() + allowed_s);
    StreamCall::Setup setup;
    setup.model = info.name;
    setup.sample_rate = info.sample_rate;
    setup.pcm = EncodePcm16(samples);
    setup.chunk_ms = streaming_.chunk_ms;
    setup.realtime = streaming_.realtime;
    setup.keep_transcript = workload_.Reference(planned) != nullptr;
    setup.bearer_token = client_.bearer_token;
    setup.deadline = std::chrono::system_clock::now() +
                     std::chrono::microseconds(static_cast<int64_t>(allowed_s * 1e6));
    setup.run_start = start_;
    setup.wake_at = [this, id](double due_s) {
      MutexLock lock(&mu_);
      due_.push({due_s, id});
      wake_ = true;
      woken_.Signal();
    };
    setup.on_done = [this, id] {
      MutexLock lock(&mu_);
      ended_.push_back(id);
      wake_ = true;
      woken_.Signal();
    };
    live.call = std::make_unique<StreamCall>(std::move(setup));
    StreamCall* call = live.call.get();
    live_.emplace(id, std::move(live));
    call->Start(stubs_[id % stubs_.size()].get());
  }

  void Record(RequestRecord record, StreamOutcome outcome) {
    record.code = outcome.code;
    if (!record.ok()) result_.run.first_errors.emplace(record.code, outcome.message);
    if (outcome.end_s > 0) record.done_s = outcome.end_s;
    {
      MutexLock lock(&mu_);
      ++finished_total_;
      if (!record.ok()) ++errors_total_;
    }
    result_.run.records.push_back(record);
    result_.streams.push_back(std::move(outcome));
  }

  // The caller's loop: wakes due streams, reaps ended ones, starts new ones, and ends when none is left.
  absl::Status Drive() {
    bool stopping = false, cancelled = false;
    double drain_until_s = 0, cancel_until_s = 0;
    while (true) {
      std::vector<uint64_t> due, ended;
      double next_due_s = 1e300;
      {
        MutexLock lock(&mu_);
        const double now = Elapsed();
        while (!due_.empty() && due_.top().at_s <= now) {
          due.push_back(due_.top().id);
          due_.pop();
        }
        if (!due_.empty()) next_due_s = due_.top().at_s;
        ended.swap(ended_);
        wake_ = false;
      }
      for (uint64_t id : due) {
        if (auto it = live_.find(id); it != live_.end()) it->second.call->SendDueChunk();
      }
      for (uint64_t id : ended) {
        auto it = live_.find(id);
        Record(it->second.record, it->second.call->TakeOutcome());
        live_.erase(it);
      }
      const double now = Elapsed();
      if (!stopping) {
        if (std::string why = StopReason(now); !why.empty()) {
          stopping = true;
          result_.run.stop_reason = why;
          // Streams in flight end by their own deadlines; a cap leaves them half a second.
          drain_until_s = std::max(now + 0.5, std::min(cap_end_s_, latest_deadline_s_ + 5));
        }
      }
      while (!stopping && static_cast<int>(live_.size()) < streaming_.streams && StopReason(Elapsed()).empty()) {
        StartStream();
      }
      if (stopping && live_.empty()) return absl::OkStatus();
      if (stopping && !cancelled && now >= drain_until_s) {
        for (auto& [id, live] : live_) live.call->Cancel();
        cancelled = true;
        result_.run.capped = true;
        cancel_until_s = now + kCancelWaitS;
      }
      if (cancelled && now >= cancel_until_s) {
        // gRPC still holds them: they cannot be freed, so they are left behind rather than freed under it.
        for (auto& [id, live] : live_) live.call.release();
        return absl::DeadlineExceededError(absl::StrCat(live_.size(), " streams did not end within ", kCancelWaitS,
                                                        " s of being cancelled"));
      }
      double wake_s = std::min(next_due_s, now + 1.0);
      if (!stopping) wake_s = std::min(wake_s, std::max(now, send_end_s_));
      if (stopping) wake_s = std::min(wake_s, cancelled ? cancel_until_s : drain_until_s);
      const absl::Time deadline = absl::Now() + absl::Seconds(std::max(0.0, wake_s - Elapsed()));
      MutexLock lock(&mu_);
      while (!wake_ && absl::Now() < deadline) woken_.WaitUntil(&mu_, deadline);
    }
  }

  // The measured window: the first measured stream's start to the last measured stream's end.
  void SetWindow() {
    double first = 1e300, last = 0;
    for (const RequestRecord& r : result_.run.records) {
      if (!r.measured) continue;
      first = std::min(first, r.scheduled_s);
      last = std::max(last, r.done_s);
    }
    result_.run.measure_start_s = first == 1e300 ? 0 : first;
    result_.run.measure_end_s = std::max(last, result_.run.measure_start_s);
  }

  const RunOptions& options_;
  const StreamingOptions& streaming_;
  const Workload& workload_;
  const ClientOptions& client_;
  const Clock::time_point start_ = Clock::now();
  const double measured_end_s_, cap_end_s_, send_end_s_;
  std::vector<std::unique_ptr<riva::RivaSpeechRecognition::Stub>> stubs_;

  // The caller's thread only.
  absl::flat_hash_map<uint64_t, Live> live_;
  uint64_t next_id_ = 0;
  int64_t started_ = 0, measured_started_ = 0;
  double latest_deadline_s_ = 0;
  StreamRunResult result_;
  std::atomic<int64_t> started_progress_{0};  // started_, for the progress bar's thread

  Mutex mu_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> ended_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  CondVar woken_;  // signalled with wake_ set (a stream's chunk is due or it ended)
  int64_t finished_total_ ABSL_GUARDED_BY(mu_) = 0, errors_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

absl::StatusOr<StreamRunResult> RunStreams(const RunOptions& options, const StreamingOptions& streaming,
                                           const Workload& workload, const ClientOptions& client) {
  if (streaming.streams <= 0) return absl::InvalidArgumentError("riva-streaming needs at least one stream");
  if (!(streaming.chunk_ms > 0)) return absl::InvalidArgumentError("the chunk length must be positive");
  for (const WorkloadModel& m : workload.models()) {
    if (m.info.sample_rate <= 0 || m.info.datatype != "FP32" || m.info.elements_per_step != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", m.info.name, " is not a speech model with FP32 samples at a known rate"));
    }
  }
  return StreamRun(options, streaming, workload, client).Run();
}

}  // namespace sluice::loadtest
