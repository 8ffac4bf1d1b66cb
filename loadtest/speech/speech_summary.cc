#include "loadtest/speech/speech_summary.h"

#include "loadtest/speech/wer.h"

namespace sluice::loadtest {

SpeechStats SummarizeSpeech(Api api, const RunResult& run, const std::vector<StreamOutcome>* streams,
                            const absl::flat_hash_map<uint64_t, std::string>& transcripts, const Workload& workload) {
  SpeechStats stats;
  stats.api = api;
  std::vector<double> chunk_ms, final_ms, first_ms;
  WerStats wer;
  for (size_t i = 0; i < run.records.size(); ++i) {
    const RequestRecord& r = run.records[i];
    if (!r.measured || !r.ok()) continue;
    stats.audio_seconds += workload.models()[r.model].info.AudioSeconds(r.length);
    if (streams != nullptr && i < streams->size()) {
      const StreamOutcome& s = (*streams)[i];
      chunk_ms.insert(chunk_ms.end(), s.chunk_latencies_ms.begin(), s.chunk_latencies_ms.end());
      if (s.final_latency_ms) final_ms.push_back(*s.final_latency_ms);
      if (s.first_result_ms) first_ms.push_back(*s.first_result_ms);
      stats.chunks += s.chunks_sent;
      stats.chunks_unanswered += s.chunks_unanswered;
    }
    const std::string* reference = workload.Reference(workload.Draw(r.index));
    if (reference == nullptr) continue;
    const auto transcript = transcripts.find(r.index);
    wer.errors += CountWordErrors(*reference, transcript == transcripts.end() ? "" : transcript->second);
    ++wer.scored;
  }
  stats.rtfx = stats.audio_seconds / run.window_s();
  stats.chunk_latency = ComputeLatencyStats(std::move(chunk_ms));
  stats.final_latency = ComputeLatencyStats(std::move(final_ms));
  stats.first_result = ComputeLatencyStats(std::move(first_ms));
  if (wer.scored > 0) {
    wer.wer = wer.errors.rate();
    stats.wer = wer;
  }
  return stats;
}

}  // namespace sluice::loadtest
