#include "loadtest/speech/stream_call.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::loadtest {

namespace riva = nvidia::riva::asr;

StreamCall::StreamCall(Setup setup)
    : setup_(std::move(setup)),
      plan_(PlanChunks(static_cast<int64_t>(setup_.pcm.size() / 2), setup_.sample_rate, setup_.chunk_ms)) {}

void StreamCall::Start(riva::RivaSpeechRecognition::Stub* stub) {
  context_.set_deadline(setup_.deadline);
  if (!setup_.bearer_token.empty()) context_.AddMetadata("authorization", "Bearer " + setup_.bearer_token);
  riva::StreamingRecognitionConfig* streaming = request_.mutable_streaming_config();
  streaming->set_interim_results(true);
  riva::RecognitionConfig* config = streaming->mutable_config();
  config->set_encoding(nvidia::riva::LINEAR_PCM);
  config->set_sample_rate_hertz(setup_.sample_rate);
  config->set_audio_channel_count(1);
  config->set_max_alternatives(1);
  config->set_model(setup_.model);
  {
    MutexLock lock(&mu_);
    outcome_.start_s = Now();
    writing_ = true;
  }
  stub->async()->StreamingRecognize(&context_, this);
  AddHold();  // chunks are written from the owner's thread too: keep the call open until the write side closes
  StartWrite(&request_);
  StartRead(&response_);
  StartCall();
}

void StreamCall::Advance() {
  Step step = Step::kNone;
  double due_s = 0;
  {
    MutexLock lock(&mu_);
    if (writing_ || write_side_closed_) return;
    const double now = Now();
    if (failed_) {
      write_side_closed_ = true;
      step = Step::kAbandon;
    } else if (next_chunk_ == plan_.chunks()) {
      write_side_closed_ = true;
      writes_done_s_ = now;
      step = Step::kWritesDone;
    } else {
      due_s = first_chunk_s_ + plan_.send_offset_s(next_chunk_);
      if (next_chunk_ > 0 && setup_.realtime && now < due_s) {
        step = Step::kWait;
      } else {
        if (next_chunk_ == 0) first_chunk_s_ = now;
        const int64_t k = next_chunk_++;
        request_.set_audio_content(setup_.pcm.substr(plan_.begin(k) * 2, (plan_.end(k) - plan_.begin(k)) * 2));
        unanswered_.push_back({plan_.end_s(k), now});
        ++outcome_.chunks_sent;
        writing_ = true;
        step = Step::kWrite;
      }
    }
  }
  switch (step) {
    case Step::kWrite:
      StartWrite(&request_);
      break;
    case Step::kWritesDone:
      StartWritesDone();
      RemoveHold();
      break;
    case Step::kAbandon:
      RemoveHold();
      break;
    case Step::kWait:
      setup_.wake_at(due_s);
      break;
    case Step::kNone:
      break;
  }
}

void StreamCall::SendDueChunk() { Advance(); }

void StreamCall::Cancel() {
  {
    MutexLock lock(&mu_);
    failed_ = true;
  }
  context_.TryCancel();
}

void StreamCall::OnWriteDone(bool ok) {
  {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) failed_ = true;
  }
  Advance();
}

void StreamCall::OnReadDone(bool ok) {
  if (!ok) {  // the server has finished the call (its status comes with OnDone)
    MutexLock lock(&mu_);
    failed_ = true;  // any chunk still to write would be lost
    return;
  }
  {
    MutexLock lock(&mu_);
    const double now = Now();
    if (response_.results_size() > 0 && !outcome_.first_result_ms) {
      outcome_.first_result_ms = (now - first_chunk_s_) * 1e3;
    }
    double processed_s = 0;
    for (const riva::StreamingRecognitionResult& result : response_.results()) {
      processed_s = std::max(processed_s, static_cast<double>(result.audio_processed()));
      if (!result.is_final()) continue;
      if (writes_done_s_) outcome_.final_latency_ms = (now - *writes_done_s_) * 1e3;
      if (setup_.keep_transcript && result.alternatives_size() > 0 && !result.alternatives(0).transcript().empty()) {
        absl::StrAppend(&outcome_.transcript, outcome_.transcript.empty() ? "" : " ",
                        result.alternatives(0).transcript());
      }
    }
    // audio_processed is a float of seconds: half a sample of slack absorbs its rounding.
    const double slack_s = 0.5 / setup_.sample_rate;
    while (!unanswered_.empty() && unanswered_.front().end_s <= processed_s + slack_s) {
      outcome_.chunk_latencies_ms.push_back((now - unanswered_.front().sent_s) * 1e3);
      unanswered_.pop_front();
    }
  }
  StartRead(&response_);
}

void StreamCall::OnDone(const grpc::Status& status) {
  {
    MutexLock lock(&mu_);
    outcome_.code = static_cast<int>(status.error_code());
    outcome_.message = status.error_message();
    outcome_.end_s = Now();
    outcome_.chunks_unanswered = static_cast<int64_t>(unanswered_.size());
  }
  setup_.on_done();  // last: the owner may delete this call from here on
}

StreamOutcome StreamCall::TakeOutcome() {
  MutexLock lock(&mu_);
  return std::move(outcome_);
}

}  // namespace sluice::loadtest
