// Unit tests of sluice-loadtest's speech side (--api riva-offline | riva-streaming), without a server: WER
// (exact edit counts, normalisation, empty sides), WAV and PCM bytes read back by libsndfile, the chunking
// arithmetic of real-time streaming, reference transcripts beside recordings, the speech summary (RTFx, chunk
// latency percentiles, corpus WER), the SLO keys for streaming, the streams sweep and the JSON/table report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <sndfile.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "loadtest/core/audio_folder.h"
#include "loadtest/core/slo.h"
#include "loadtest/core/sweep.h"
#include "loadtest/core/workload.h"
#include "loadtest/report/report_json.h"
#include "loadtest/report/report_table.h"
#include "loadtest/speech/speech_audio.h"
#include "loadtest/speech/speech_summary.h"
#include "loadtest/speech/wer.h"

namespace sluice::loadtest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

void ExpectErrors(const WordErrors& e, int64_t words, int64_t s, int64_t i, int64_t d) {
  EXPECT_EQ(e.reference_words, words);
  EXPECT_EQ(e.substitutions, s);
  EXPECT_EQ(e.insertions, i);
  EXPECT_EQ(e.deletions, d);
}

TEST(WerTest, IdenticalTranscriptsHaveNoErrors) {
  const WordErrors e = CountWordErrors("the cat sat on the mat", "the cat sat on the mat");
  ExpectErrors(e, 6, 0, 0, 0);
  EXPECT_EQ(e.rate(), 0);
}

TEST(WerTest, OneSubstitution) {
  const WordErrors e = CountWordErrors("the cat sat on the mat", "the cat sit on the mat");
  ExpectErrors(e, 6, 1, 0, 0);
  EXPECT_DOUBLE_EQ(e.rate(), 1.0 / 6);
}

TEST(WerTest, InsertionsAndDeletions) {
  ExpectErrors(CountWordErrors("a b c", "a x b c y"), 3, 0, 2, 0);
  ExpectErrors(CountWordErrors("a b c d", "b d"), 4, 0, 0, 2);
  // One of each: "cat" for "bat", "the" missed, "now" extra.
  const WordErrors e = CountWordErrors("the bat sat down", "bat cat sat down now");
  EXPECT_EQ(e.errors(), 3);
  EXPECT_DOUBLE_EQ(e.rate(), 3.0 / 4);
}

TEST(WerTest, EqualLengthScriptsPreferSubstitutions) {
  // Two substitutions or a deletion plus an insertion: both cost 2; substitutions are counted.
  ExpectErrors(CountWordErrors("a b", "b c"), 2, 2, 0, 0);
}

TEST(WerTest, EmptyReferenceOrHypothesis) {
  const WordErrors no_reference = CountWordErrors("", "hello there");
  ExpectErrors(no_reference, 0, 0, 2, 0);
  EXPECT_EQ(no_reference.rate(), 2);  // errors over max(reference words, 1)
  const WordErrors no_hypothesis = CountWordErrors("one two three", "  ");
  ExpectErrors(no_hypothesis, 3, 0, 0, 3);
  EXPECT_EQ(no_hypothesis.rate(), 1);
  const WordErrors neither = CountWordErrors("", "");
  ExpectErrors(neither, 0, 0, 0, 0);
  EXPECT_EQ(neither.rate(), 0);
}

TEST(WerTest, CaseAndPunctuationAreNormalisedAway) {
  EXPECT_THAT(NormalizeWords("  Hello, World!\tIt's\n\"FINE\"... ok"),
              ElementsAre("hello", "world", "its", "fine", "ok"));
  EXPECT_THAT(NormalizeWords("Ünïcode stays"), ElementsAre("Ünïcode", "stays"));  // only ASCII is lowercased
  ExpectErrors(CountWordErrors("Hello, world! It's fine.", "hello world its FINE"), 4, 0, 0, 0);
  // A word of punctuation only is no word.
  ExpectErrors(CountWordErrors("yes - no", "yes no"), 2, 0, 0, 0);
}

TEST(WerTest, CorpusSumsErrorsAndWords) {
  WordErrors total = CountWordErrors("a b c d", "a b c d");
  total += CountWordErrors("e f", "e g h");
  ExpectErrors(total, 6, 1, 1, 0);
  EXPECT_DOUBLE_EQ(total.rate(), 2.0 / 6);
}

// libsndfile reads `bytes` (a WAV file, or headerless 16-bit PCM at `raw_rate` when not 0) back as shorts.
std::vector<short> ReadBack(const std::string& bytes, int raw_rate, SF_INFO& info) {
  const auto path = std::filesystem::temp_directory_path() / ("lt_speech_" + std::to_string(::getpid()) + ".bin");
  std::ofstream(path, std::ios::binary) << bytes;
  info = {};
  if (raw_rate > 0) {
    info.samplerate = raw_rate;
    info.channels = 1;
    info.format = SF_FORMAT_RAW | SF_FORMAT_PCM_16 | SF_ENDIAN_LITTLE;
  }
  SNDFILE* file = sf_open(path.c_str(), SFM_READ, &info);
  EXPECT_NE(file, nullptr) << sf_strerror(nullptr);
  std::vector<short> samples(static_cast<size_t>(info.frames));
  if (file != nullptr) {
    sf_readf_short(file, samples.data(), info.frames);
    sf_close(file);
  }
  std::filesystem::remove(path);
  return samples;
}

TEST(SpeechAudioTest, WavIsMono16BitPcmAtTheRate) {
  const std::vector<float> samples = {0.0f, 0.5f, -0.5f, 1.0f, 1.5f, -2.0f, 0.25f, -1.0f};
  absl::StatusOr<std::string> wav = EncodeWav(samples, 8000);
  ASSERT_TRUE(wav.ok()) << wav.status();
  EXPECT_EQ(wav->substr(0, 4), "RIFF");
  EXPECT_EQ(wav->substr(8, 4), "WAVE");
  SF_INFO info;
  const std::vector<short> back = ReadBack(*wav, 0, info);
  EXPECT_EQ(info.samplerate, 8000);
  EXPECT_EQ(info.channels, 1);
  EXPECT_EQ(info.format, SF_FORMAT_WAV | SF_FORMAT_PCM_16);
  // x × 32768, clipped (not wrapped round) to 16 bits.
  EXPECT_THAT(back, ElementsAre(0, 16384, -16384, 32767, 32767, -32768, 8192, -32768));
}

TEST(SpeechAudioTest, Pcm16IsTheWavFilesSamplesWithoutHeader) {
  std::vector<float> samples(1000);
  for (size_t i = 0; i < samples.size(); ++i) samples[i] = static_cast<float>(i % 200) / 200.0f - 0.5f;
  const std::string pcm = EncodePcm16(samples);
  absl::StatusOr<std::string> wav = EncodeWav(samples, 16000);
  ASSERT_TRUE(wav.ok());
  ASSERT_EQ(pcm.size(), 2 * samples.size());
  EXPECT_TRUE(wav->size() > pcm.size() && wav->compare(wav->size() - pcm.size(), pcm.size(), pcm) == 0);
  // Little-endian: sample 150 is 0.25 = 8192 = 0x2000.
  EXPECT_EQ(pcm[300], 0x00);
  EXPECT_EQ(pcm[301], 0x20);
  SF_INFO info;
  EXPECT_EQ(ReadBack(pcm, 16000, info).size(), samples.size());
}

TEST(SpeechAudioTest, SixteenBitRecordingsGoOutBitExact) {
  // What libsndfile reads from a 16-bit file (s / 32768) is written back as the same s.
  std::vector<float> read(65536);
  for (int s = -32768; s <= 32767; ++s) read[s + 32768] = static_cast<float>(s) / 32768.0f;
  const std::vector<int16_t> pcm = ToPcm16(read);
  for (int s = -32768; s <= 32767; ++s) ASSERT_EQ(pcm[s + 32768], s);
  EXPECT_EQ(ToPcm16(std::vector<float>{std::nanf("")})[0], 0);
}

TEST(SpeechAudioTest, ChunkArithmetic) {
  const ChunkPlan even = PlanChunks(32000, 16000, 100);  // 2 s in 100 ms chunks
  EXPECT_EQ(even.chunk_samples, 1600);
  EXPECT_EQ(even.chunks(), 20);
  EXPECT_EQ(even.begin(19), 30400);
  EXPECT_EQ(even.end(19), 32000);
  EXPECT_DOUBLE_EQ(even.send_offset_s(0), 0);
  EXPECT_DOUBLE_EQ(even.send_offset_s(10), 1.0);
  EXPECT_DOUBLE_EQ(even.end_s(0), 0.1);
  EXPECT_DOUBLE_EQ(even.end_s(19), 2.0);

  const ChunkPlan ragged = PlanChunks(32001, 16000, 100);  // one sample more: a last chunk of one sample
  EXPECT_EQ(ragged.chunks(), 21);
  EXPECT_EQ(ragged.end(20) - ragged.begin(20), 1);
  EXPECT_DOUBLE_EQ(ragged.end_s(20), 32001.0 / 16000);

  EXPECT_EQ(PlanChunks(44100, 44100, 10).chunk_samples, 441);
  EXPECT_EQ(PlanChunks(8000, 8000, 30).chunk_samples, 240);
  EXPECT_EQ(PlanChunks(100, 16000, 0.001).chunk_samples, 1);  // never empty chunks
  EXPECT_EQ(PlanChunks(1, 16000, 100).chunks(), 1);
}

void WriteWav(const std::filesystem::path& path, int frames) {
  SF_INFO info{};
  info.samplerate = 16000;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  std::vector<float> samples(frames, 0.1f);
  sf_write_float(file, samples.data(), frames);
  sf_close(file);
}

TEST(SpeechAudioTest, ReferenceTranscriptsBesideRecordings) {
  const auto dir = std::filesystem::temp_directory_path() / ("lt_refs_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  WriteWav(dir / "a.wav", 800);
  WriteWav(dir / "b.wav", 900);
  std::ofstream(dir / "a.txt") << "  Hello there.\n";
  std::ofstream(dir / "notes.TXT") << "not audio, not a reference of any recording";
  std::ofstream(dir / "manifest.tsv") << "a.wav\tHello there.\n";  // a test set's manifest: text, not audio
  absl::StatusOr<AudioFolder> folder = LoadAudioFolder(dir.string(), 16000, 16000);
  ASSERT_TRUE(folder.ok()) << folder.status();
  ASSERT_EQ(folder->clips.size(), 2u);  // the text files are not audio
  EXPECT_EQ(folder->clips[0].reference, "Hello there.");
  EXPECT_FALSE(folder->clips[1].reference.has_value());
  absl::StatusOr<std::vector<AudioFileInfo>> probed = ProbeAudioFolder(dir.string());
  ASSERT_TRUE(probed.ok()) << probed.status();
  EXPECT_EQ(probed->size(), 2u);
  std::filesystem::remove_all(dir);
}

// espeak-ng writes 22.05 kHz WAVs: the folder reader resamples them to the model's rate (as the server does) rather
// than refusing them. A 440 Hz tone of 1 s must come out as ~16000 samples still carrying 440 Hz (880 sign
// changes), at the same level.
TEST(SpeechAudioTest, RecordingsAtAnotherRateAreResampledToTheModels) {
  const auto dir = std::filesystem::temp_directory_path() / ("lt_resample_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  SF_INFO info{};
  info.samplerate = 22050;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* file = sf_open((dir / "espeak.wav").c_str(), SFM_WRITE, &info);
  ASSERT_NE(file, nullptr) << sf_strerror(nullptr);
  std::vector<float> tone(22050);
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = 0.5f * static_cast<float>(std::sin(2 * M_PI * 440 * i / 22050.0));
  sf_writef_float(file, tone.data(), static_cast<sf_count_t>(tone.size()));
  sf_close(file);

  absl::StatusOr<AudioFolder> folder = LoadAudioFolder(dir.string(), 16000, 256000);
  ASSERT_TRUE(folder.ok()) << folder.status();
  ASSERT_EQ(folder->clips.size(), 1u);
  EXPECT_EQ(folder->resampled, 1);
  const std::vector<float>& out = folder->clips[0].samples;
  EXPECT_NEAR(static_cast<double>(out.size()), 16000.0, 16.0);
  int sign_changes = 0;
  double peak = 0;
  for (size_t i = 200; i + 200 < out.size(); ++i) {  // away from the converter's edges
    if ((out[i] >= 0) != (out[i - 1] >= 0)) ++sign_changes;
    peak = std::max(peak, static_cast<double>(std::abs(out[i])));
  }
  const double seconds = static_cast<double>(out.size() - 400) / 16000;
  EXPECT_NEAR(sign_changes, 2 * 440 * seconds, 4);
  EXPECT_NEAR(peak, 0.5, 0.02);
  // A clip over the largest bucket is cut after resampling: 0.5 s at 16 kHz.
  folder = LoadAudioFolder(dir.string(), 16000, 8000);
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ(folder->clips[0].samples.size(), 8000u);
  EXPECT_EQ(folder->truncated, 1);
  std::filesystem::remove_all(dir);
}

// A speech workload over two recordings: clip 0 with reference "alpha beta gamma", clip 1 without.
std::unique_ptr<Workload> ClipWorkload() {
  AudioFolder folder;
  folder.clips.push_back({"a.wav", std::vector<float>(32000, 0.1f), "alpha beta gamma"});
  folder.clips.push_back({"b.wav", std::vector<float>(16000, 0.1f), std::nullopt});
  ModelInfo info;
  info.name = "asr_ctc";
  info.kind = "speech";
  info.input_name = "audio";
  info.datatype = "FP32";
  info.max_length = 256000;
  info.sample_rate = 16000;
  std::vector<WorkloadModel> models;
  models.push_back({info, 1.0, nullptr, std::make_shared<const AudioFolder>(std::move(folder))});
  return *Workload::Create(std::move(models), 7);
}

TEST(SpeechSummaryTest, RtfxChunkLatenciesAndCorpusWer) {
  std::unique_ptr<Workload> workload = ClipWorkload();
  RunResult run;
  std::vector<StreamOutcome> streams;
  absl::flat_hash_map<uint64_t, std::string> transcripts;
  int with_reference = 0;
  for (uint64_t i = 0; i < 12; ++i) {
    const PlannedRequest planned = workload->Draw(i);
    RequestRecord r{.index = i, .model = 0, .length = planned.length, .scheduled_s = 1.0 + i, .sent_s = 1.0 + i,
                    .done_s = 2.0 + i, .code = i == 11 ? 4 : 0, .measured = i > 0};
    run.records.push_back(r);
    StreamOutcome s;
    s.chunks_sent = 10;
    s.chunk_latencies_ms = {10.0 * (i + 1), 20.0 * (i + 1)};
    s.final_latency_ms = 50;
    s.first_result_ms = 400;
    streams.push_back(s);
    if (workload->Reference(planned) != nullptr && r.measured && r.ok()) {
      ++with_reference;
      // Every scored transcript but the first misses "gamma".
      transcripts[i] = with_reference == 1 ? "Alpha, beta gamma." : "alpha beta";
    }
  }
  ASSERT_GE(with_reference, 2) << "the seed should draw clip 0 at least twice among requests 1-10";
  run.measure_start_s = 2;
  run.measure_end_s = 12;
  const SpeechStats stats = SummarizeSpeech(Api::kRivaStreaming, run, &streams, transcripts, *workload);
  // Requests 1-10 succeed and are measured (0 is warm-up, 11 failed).
  double audio_s = 0;
  for (uint64_t i = 1; i <= 10; ++i) audio_s += workload->Draw(i).length / 16000.0;
  EXPECT_DOUBLE_EQ(stats.audio_seconds, audio_s);
  EXPECT_DOUBLE_EQ(stats.rtfx, audio_s / 10);
  EXPECT_EQ(stats.chunk_latency.count, 20);
  EXPECT_EQ(stats.chunk_latency.min_ms, 20);   // request 1's first: 10 × (1 + 1)
  EXPECT_EQ(stats.chunk_latency.max_ms, 220);  // request 10's second: 20 × (10 + 1)
  EXPECT_EQ(stats.final_latency.count, 10);
  EXPECT_EQ(stats.chunks, 100);
  ASSERT_TRUE(stats.wer.has_value());
  EXPECT_EQ(stats.wer->scored, with_reference);
  ExpectErrors(stats.wer->errors, 3 * with_reference, 0, 0, with_reference - 1);
  EXPECT_DOUBLE_EQ(stats.wer->wer, (with_reference - 1) / (3.0 * with_reference));

  // Offline (no stream outcomes) and no transcripts at all: every reference counts as all deleted.
  const SpeechStats offline = SummarizeSpeech(Api::kRivaOffline, run, nullptr, {}, *workload);
  EXPECT_EQ(offline.chunk_latency.count, 0);
  ASSERT_TRUE(offline.wer.has_value());
  EXPECT_EQ(offline.wer->wer, 1);
}

TEST(SpeechSloTest, ChunkAndFinalLatencyAndWerObjectives) {
  absl::StatusOr<SloSpec> slo = ParseSlo("chunk_latency_ms: {p95: 300}\nfinal_latency_ms: {p99: 800}\nmax_wer: 0.2\n",
                                         "slo.yaml");
  ASSERT_TRUE(slo.ok()) << slo.status();
  EXPECT_FALSE(slo->empty());
  RunSummary summary;
  summary.total.requests = summary.total.ok = 4;
  SpeechStats speech;
  speech.chunk_latency = ComputeLatencyStats({100, 200, 250, 290});
  speech.final_latency = ComputeLatencyStats({900});
  speech.wer = WerStats{.scored = 2, .errors = {}, .wer = 0.1};
  summary.speech = speech;
  std::vector<Verdict> verdicts = Evaluate(*slo, summary);
  ASSERT_EQ(verdicts.size(), 3u);
  EXPECT_EQ(verdicts[0].name, "p95 chunk latency (ms)");
  EXPECT_TRUE(verdicts[0].pass);
  EXPECT_EQ(verdicts[1].name, "p99 final latency (ms)");
  EXPECT_FALSE(verdicts[1].pass);
  EXPECT_EQ(verdicts[2].name, "WER");
  EXPECT_TRUE(verdicts[2].pass);

  summary.speech.reset();  // a KServe run: no speech figures cannot pass speech objectives
  for (const Verdict& v : Evaluate(*slo, summary)) EXPECT_FALSE(v.pass) << v.name;

  absl::StatusOr<SloSpec> bad = ParseSlo("chunk_latency_ms: {p97: 3}\n", "bad.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("bad.yaml"));
  EXPECT_FALSE(ParseSlo("max_wer: -1\n", "neg.yaml").ok());
}

TEST(SpeechSweepTest, StreamsSweepNamesTheMostStreamsThatHoldTheSlo) {
  SweepOptions options;
  options.knob = "streams";
  options.start = 1;
  options.factor = 2;
  options.steps = 5;
  absl::StatusOr<std::vector<double>> levels = SweepLevels(options);
  ASSERT_TRUE(levels.ok());
  EXPECT_THAT(*levels, ElementsAre(1, 2, 4, 8, 16));

  SloSpec slo = *ParseSlo("chunk_latency_ms: {p95: 300}\n", "slo.yaml");
  // p95 chunk latency grows with the streams: 100 ms per 4 streams; RTFx falls past 4 (fewer req/s at 8).
  auto measure = [](double level) -> absl::StatusOr<RunSummary> {
    RunSummary s;
    s.total.requests = s.total.ok = 10;
    s.total.req_per_s = level <= 4 ? level : 8 / level;
    SpeechStats speech;
    speech.api = Api::kRivaStreaming;
    speech.streams = static_cast<int>(level);
    speech.rtfx = level;
    speech.chunk_latency = ComputeLatencyStats({level * 25});
    s.speech = speech;
    return s;
  };
  std::vector<SweepStep> steps;
  std::optional<size_t> best;
  ASSERT_TRUE(RunSweep(options, slo, measure, steps, best).ok());
  ASSERT_EQ(steps.size(), 5u);  // 16 streams fail (400 ms) and end the sweep
  EXPECT_FALSE(steps.back().pass);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(steps[*best].level, 8);  // the most streams, though 4 had more req/s

  Report report;
  report.api = Api::kRivaStreaming;
  report.summary = steps[*best].summary;
  report.summary.per_model.resize(1);
  report.sweep = steps;
  report.sweep_best = best;
  const std::string table = FormatReport(report);
  EXPECT_THAT(table, HasSubstr("sweep over streams"));
  EXPECT_THAT(table, HasSubstr("most streams meeting the SLO: 8"));
  rapidjson::Document doc;
  doc.Parse(ReportToJson(report).c_str());
  ASSERT_FALSE(doc.HasParseError());
  EXPECT_EQ(rapidjson::Pointer("/sweep/best_level").Get(doc)->GetDouble(), 8);
  EXPECT_EQ(rapidjson::Pointer("/sweep/best_rtfx").Get(doc)->GetDouble(), 8);
  EXPECT_EQ(rapidjson::Pointer("/sweep/steps/2/speech/chunk_latency_ms/p95").Get(doc)->GetDouble(), 100);
}

TEST(SpeechReportTest, JsonAndTableCarryTheSpeechFigures) {
  Report report;
  report.api = Api::kRivaStreaming;
  report.summary.per_model.resize(1);
  report.summary.per_model[0].model = "asr_ctc";
  SpeechStats speech;
  speech.api = Api::kRivaStreaming;
  speech.streams = 8;
  speech.chunk_ms = 100;
  speech.realtime = true;
  speech.audio_seconds = 160;
  speech.rtfx = 7.5;
  speech.chunks = 1600;
  speech.chunk_latency = ComputeLatencyStats({100, 200, 300});
  speech.final_latency = ComputeLatencyStats({40});
  speech.first_result = ComputeLatencyStats({450});
  speech.wer = WerStats{.scored = 3, .errors = {.reference_words = 10, .substitutions = 1, .insertions = 1,
                                                .deletions = 0},
                        .wer = 0.2};
  report.summary.speech = speech;
  rapidjson::Document doc;
  doc.Parse(ReportToJson(report).c_str());
  ASSERT_FALSE(doc.HasParseError());
  const auto number = [&](const char* pointer) {
    const rapidjson::Value* v = rapidjson::Pointer(pointer).Get(doc);
    EXPECT_NE(v, nullptr) << pointer;
    return v != nullptr ? v->GetDouble() : NAN;
  };
  EXPECT_EQ(std::string(doc["config"]["api"].GetString()), "riva-streaming");
  EXPECT_EQ(number("/results/speech/streams"), 8);
  EXPECT_EQ(number("/results/speech/rtfx"), 7.5);
  EXPECT_EQ(number("/results/speech/chunk_latency_ms/p50"), 200);
  EXPECT_EQ(number("/results/speech/final_latency_ms/count"), 1);
  EXPECT_EQ(number("/results/speech/first_result_ms/p99"), 450);
  EXPECT_EQ(number("/results/speech/wer/wer"), 0.2);
  EXPECT_EQ(number("/results/speech/wer/substitutions"), 1);
  EXPECT_EQ(rapidjson::Pointer("/per_model/0/speech").Get(doc), nullptr);  // the total only

  const std::string table = FormatReport(report);
  EXPECT_THAT(table, HasSubstr("Riva StreamingRecognize, 8 streams, 100 ms chunks at real time"));
  EXPECT_THAT(table, HasSubstr("RTFx 7.50"));
  EXPECT_THAT(table, HasSubstr("WER 20.00 % (2 errors / 10 reference words"));
}

}  // namespace
}  // namespace sluice::loadtest
