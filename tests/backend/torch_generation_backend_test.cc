// The libtorch GenerationBackend on the exported example decoder llama_tiny (backend/compile/llama_export.py):
// every graph loads and warms; padding rows, prompt buckets and KV-length buckets never change a real row's
// logits; and greedy prefill + decode in C++ reproduces the eager Python model's generations
// (reference_generation.json), a flipped token being accepted only where the reference's top-2 margin was
// below 1e-4.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "backend/base/model_config.h"
#include "backend/generation_backend.h"
#include "tests/backend/test_models.h"
#include "tests/float_tolerance.h"

namespace sluice {
namespace {

using ::sluice::testing::ExampleModelDir;
using ::testing::HasSubstr;

// A greedy token may differ from the reference only at a near tie (tests/float_tolerance.h).
constexpr double kFlipMargin = ::sluice::testing::kNearTieMargin;

struct ReferenceGeneration {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::vector<double> top2_margins;
};

std::vector<int32_t> IntArray(const rapidjson::Value& value) {
  std::vector<int32_t> ids;
  for (const auto& v : value.GetArray()) ids.push_back(v.GetInt());
  return ids;
}

std::vector<ReferenceGeneration> LoadReference(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  rapidjson::Document doc;
  doc.Parse(text.str().c_str());
  EXPECT_FALSE(doc.HasParseError()) << path;
  std::vector<ReferenceGeneration> cases;
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("cases")) return cases;
  for (const auto& c : doc["cases"].GetArray()) {
    ReferenceGeneration ref{IntArray(c["prompt_ids"]), IntArray(c["output_ids"]), {}};
    for (const auto& m : c["top2_margins"].GetArray()) ref.top2_margins.push_back(m.GetDouble());
    cases.push_back(std::move(ref));
  }
  return cases;
}

// llama_tiny loaded once on the CPU (20 graphs: a few seconds), shared by the tests.
struct LoadedDecoder {
  std::unique_ptr<ModelConfig> config;
  std::unique_ptr<GenerationBackend> instance;
  std::vector<ReferenceGeneration> cases;
};

LoadedDecoder& Decoder() {
  static LoadedDecoder* decoder = [] {
    auto* d = new LoadedDecoder();
    const std::string dir = ExampleModelDir("llama_tiny");
    absl::StatusOr<ModelConfig> config = LoadModelConfig(dir);
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return d;
    d->config = std::make_unique<ModelConfig>(*config);
    InstanceGroup group{1, DeviceKind::kCpu, std::nullopt, 1};
    absl::StatusOr<std::unique_ptr<GenerationBackend>> instance =
        GenerationBackend::Create({d->config.get(), group, 0, 1});
    EXPECT_TRUE(instance.ok()) << instance.status();
    if (instance.ok()) d->instance = std::move(*instance);
    d->cases = LoadReference(dir + "/reference_generation.json");
    return d;
  }();
  return *decoder;
}

const GenerationOptions& Options() { return *Decoder().config->generation; }

template <typename T>
T SmallestAtLeast(const std::vector<T>& buckets, int64_t value) {
  return *std::find_if(buckets.begin(), buckets.end(), [&](T b) { return b >= value; });
}

int Argmax(const Logits& logits, int row) {
  const float* values = logits.row(row);
  return static_cast<int>(std::max_element(values, values + logits.vocab) - values);
}

// The bound for comparing `row` of `logits` with the same logits from another graph shape (tests/float_tolerance.h).
double Tolerance(const Logits& logits, int row) {
  return ::sluice::testing::CrossShapeTolerance(std::span<const float>(logits.row(row), logits.vocab));
}

float MaxAbsDiff(const Logits& a, int row_a, const Logits& b, int row_b) {
  float diff = 0;
  for (int i = 0; i < a.vocab; ++i) diff = std::max(diff, std::abs(a.row(row_a)[i] - b.row(row_b)[i]));
  return diff;
}

Logits Prefill(const std::vector<int32_t>& prompt, int slot, int64_t bucket = 0) {
  if (bucket == 0) bucket = SmallestAtLeast(Options().prefill_lengths, static_cast<int64_t>(prompt.size()));
  absl::StatusOr<Logits> logits = Decoder().instance->Prefill({bucket, slot, prompt});
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : Logits{};
}

// The prompt written chunk by chunk into `slot`, the chunk lengths taken in turn from `pattern` (each a compiled
// chunk length; a prompt's last chunk may be shorter); the logits of the last chunk.
Logits PrefillInChunks(const std::vector<int32_t>& prompt, int slot, const std::vector<int64_t>& pattern) {
  const GenerationOptions& g = Options();
  absl::StatusOr<Logits> logits = absl::InternalError("empty prompt");
  int64_t start = 0;
  for (size_t i = 0; start < static_cast<int64_t>(prompt.size()); ++i) {
    const int64_t n = std::min<int64_t>(pattern[i % pattern.size()], static_cast<int64_t>(prompt.size()) - start);
    PrefillChunkInput input{SmallestAtLeast(g.prefill_chunk_lengths, n), SmallestAtLeast(g.kv_lengths, start + n),
                            slot, start, std::vector<int32_t>(prompt.begin() + start, prompt.begin() + start + n)};
    logits = Decoder().instance->PrefillChunk(input);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return Logits{};
    start += n;
  }
  return *logits;
}

Logits Decode(int batch_size, int64_t kv_length, const std::vector<DecodeRow>& rows) {
  absl::StatusOr<Logits> logits = Decoder().instance->Decode({batch_size, kv_length, rows});
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : Logits{};
}

class TorchGenerationBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Decoder().instance != nullptr);
    ASSERT_GE(Decoder().cases.size(), 4u) << "reference_generation.json has too few cases";
  }
};

TEST_F(TorchGenerationBackendTest, EveryGraphLoadsAndWarms) {
  const GenerationOptions& g = Options();
  const auto& stats = Decoder().instance->load_stats();
  ASSERT_EQ(stats.size(), g.prefill_lengths.size() +
                             (g.prefill_chunk_lengths.size() + g.decode_batch_sizes.size()) * g.kv_lengths.size());
  for (const BucketLoadStats& s : stats) {
    EXPECT_GT(s.load_seconds, 0) << s.batch_size << "x" << s.length;
    EXPECT_GT(s.warm_seconds, 0) << s.batch_size << "x" << s.length;
  }
  EXPECT_EQ(stats.front().batch_size, 1);
  EXPECT_EQ(stats.front().length, g.prefill_lengths.front());
  EXPECT_EQ(stats.back().batch_size, g.decode_batch_sizes.back());
  EXPECT_EQ(stats.back().length, g.kv_lengths.back());
  EXPECT_THAT(Decoder().instance->Describe(),
              HasSubstr(absl::StrCat("llama_tiny#0 on cpu (1 intra-op thread, KV cache ", g.kv_cache.slots,
                                     " slots x ", g.context_length, " positions, ")));
}

TEST_F(TorchGenerationBackendTest, PaddingRowsDoNotChangeRealRows) {
  // Three sequences in slots 5, 9, 2 at different positions; a batch of 4 (one padding row) and each row alone.
  std::vector<DecodeRow> rows;
  for (int i = 0; i < 3; ++i) {
    const ReferenceGeneration& c = Decoder().cases[i];
    const int slot = std::vector<int>{5, 9, 2}[i];
    Logits first = Prefill(c.prompt_ids, slot);
    rows.push_back({Argmax(first, 0), static_cast<int64_t>(c.prompt_ids.size()), slot});
  }
  int64_t furthest = 0;
  for (const DecodeRow& row : rows) furthest = std::max(furthest, row.position);
  const int64_t kv = SmallestAtLeast(Options().kv_lengths, furthest + 1);
  // Sequences in the first and last slots, which the padding row must leave alone.
  std::vector<DecodeRow> guards;
  for (int slot : {0, Options().kv_cache.slots - 1}) {
    const std::vector<int32_t>& prompt = Decoder().cases[4].prompt_ids;
    guards.push_back({Argmax(Prefill(prompt, slot), 0), static_cast<int64_t>(prompt.size()), slot});
  }
  Logits guards_before = Decode(2, 256, guards);

  Logits batched = Decode(4, kv, rows);
  ASSERT_EQ(batched.rows, 3);
  Logits guards_after = Decode(2, 256, guards);
  EXPECT_EQ(guards_before.values, guards_after.values) << "a padding row wrote into a real slot";
  float max_diff = 0;
  for (int r = 0; r < 3; ++r) {
    // Re-running the same row at the same position rewrites the same K/V: the alone run sees the same cache.
    Logits alone = Decode(1, kv, {rows[r]});
    const float diff = MaxAbsDiff(batched, r, alone, 0);
    EXPECT_LE(diff, Tolerance(alone, 0)) << "row " << r;
    max_diff = std::max(max_diff, diff);
  }
  std::cout << "decode batch 4 (3 real rows) vs alone at batch 1: max abs diff " << max_diff << "\n";
  RecordProperty("max_abs_diff_batch4_vs_alone", std::to_string(max_diff));
}

// DecodeInput::picks, all greedy: the ids picked where the logits are (here the CPU) are the greedy picks of the
// same step's logits, and no logits come back. With a sampled row, the CPU backend returns the logits (the host
// sampler is cheaper there than torch's sort and scans: torch_generation_backend.cc, PicksHere).
TEST_F(TorchGenerationBackendTest, GreedyPicksDecodeReturnsTheArgmaxIdsOfTheSameStep) {
  std::vector<DecodeRow> rows;
  int64_t furthest = 0;
  for (int i = 0; i < 3; ++i) {
    const ReferenceGeneration& c = Decoder().cases[i];
    const int slot = std::vector<int>{5, 9, 2}[i];
    rows.push_back({Argmax(Prefill(c.prompt_ids, slot), 0), static_cast<int64_t>(c.prompt_ids.size()), slot});
    furthest = std::max(furthest, rows.back().position);
  }
  const int64_t kv = SmallestAtLeast(Options().kv_lengths, furthest + 1);
  // Re-running the same rows at the same positions rewrites the same K/V: every call sees the same cache.
  Logits full = Decode(4, kv, rows);
  absl::StatusOr<Logits> picked = Decoder().instance->Decode({4, kv, rows, std::vector<TokenPick>(3)});
  ASSERT_TRUE(picked.ok()) << picked.status();
  EXPECT_TRUE(picked->values.empty());
  EXPECT_EQ(picked->rows, 3);
  ASSERT_EQ(picked->picked.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(picked->picked[r], Argmax(full, r)) << "row " << r;

  std::vector<TokenPick> one_sampled(3);
  one_sampled[1] = {0.8f, 10, 0.9f, 0.5};
  absl::StatusOr<Logits> logits = Decoder().instance->Decode({4, kv, rows, one_sampled});
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_TRUE(logits->picked.empty());
  EXPECT_EQ(logits->values, full.values);
}

TEST_F(TorchGenerationBackendTest, PromptBucketsDoNotChangeTheLogits) {
  const std::vector<int32_t>& prompt = Decoder().cases[1].prompt_ids;
  ASSERT_LE(prompt.size(), 64u);
  Logits in64 = Prefill(prompt, 3, 64);
  Logits in128 = Prefill(prompt, 4, 128);
  const float diff = MaxAbsDiff(in64, 0, in128, 0);
  std::cout << "prefill bucket 64 vs 128: max abs diff " << diff << "\n";
  EXPECT_LE(diff, Tolerance(in64, 0));
  // And the first decode step after either prefill agrees too.
  const int32_t next = Argmax(in64, 0);
  const auto position = static_cast<int64_t>(prompt.size());
  Logits after = Decode(2, 256, {{next, position, 3}, {next, position, 4}});
  EXPECT_LE(MaxAbsDiff(after, 0, after, 1), Tolerance(after, 0));
}

TEST_F(TorchGenerationBackendTest, KvBucketsDoNotChangeTheLogits) {
  const std::vector<int32_t>& prompt = Decoder().cases[3].prompt_ids;
  Logits first = Prefill(prompt, 7);
  const DecodeRow row{Argmax(first, 0), static_cast<int64_t>(prompt.size()), 7};
  ASSERT_LT(row.position, 256);
  Logits in256 = Decode(1, 256, {row});
  Logits in512 = Decode(1, 512, {row});
  Logits in1024 = Decode(2, 1024, {row});
  const float diff = std::max(MaxAbsDiff(in256, 0, in512, 0), MaxAbsDiff(in256, 0, in1024, 0));
  std::cout << "KV bucket 256 vs 512/1024 at position " << row.position << ": max abs diff " << diff << "\n";
  EXPECT_LE(diff, Tolerance(in256, 0));
}

// Greedy generation of every reference case from its first logits (case i in slot i), all of them decoding
// together (the batch padded to a batch bucket, the KV bucket chosen by the furthest position), as the engine runs
// them; every token must equal the reference's, except where its top-2 margin is a near tie (then the case
// stops). Returns the flipped tokens.
int GreedyFromFirstLogits(const std::vector<Logits>& first, const char* what) {
  const std::vector<ReferenceGeneration>& cases = Decoder().cases;
  const GenerationOptions& g = Options();
  struct Running {
    size_t index;
    std::vector<int32_t> output;
  };
  int flips = 0;
  // Appends `token` to case `r`; false (and the case stops) when it differs from the reference.
  auto accept = [&](Running& r, int32_t token) {
    const ReferenceGeneration& ref = cases[r.index];
    const size_t step = r.output.size();
    r.output.push_back(token);
    if (token == ref.output_ids[step]) return step + 1 < ref.output_ids.size();
    ++flips;
    EXPECT_LT(ref.top2_margins[step], kFlipMargin)
        << what << ": case " << r.index << " step " << step << ": got token " << token << ", reference "
        << ref.output_ids[step] << " with a top-2 margin of " << ref.top2_margins[step];
    return false;
  };
  std::vector<Running> active;
  for (size_t i = 0; i < cases.size(); ++i) {
    Running r{i, {}};
    if (accept(r, Argmax(first[i], 0))) active.push_back(std::move(r));
  }
  int steps = 0;
  while (!active.empty()) {
    std::vector<DecodeRow> rows;
    int64_t furthest = 0;
    for (const Running& r : active) {
      const auto position = static_cast<int64_t>(cases[r.index].prompt_ids.size() + r.output.size() - 1);
      rows.push_back({r.output.back(), position, static_cast<int>(r.index)});
      furthest = std::max(furthest, position);
    }
    const int batch = SmallestAtLeast(g.decode_batch_sizes, static_cast<int64_t>(rows.size()));
    Logits logits = Decode(batch, SmallestAtLeast(g.kv_lengths, furthest + 1), rows);
    EXPECT_EQ(logits.rows, static_cast<int>(rows.size()));
    if (logits.rows != static_cast<int>(rows.size())) break;
    std::vector<Running> still;
    for (size_t r = 0; r < active.size(); ++r) {
      if (accept(active[r], Argmax(logits, static_cast<int>(r)))) still.push_back(std::move(active[r]));
    }
    active = std::move(still);
    ++steps;
  }
  std::cout << what << ": " << cases.size() << " reference cases, " << steps << " decode steps, flipped tokens: "
            << flips << " (a flip passes only where the reference's top-2 margin is < " << kFlipMargin << ")\n";
  return flips;
}

TEST_F(TorchGenerationBackendTest, GreedyGenerationReproducesTheReference) {
  const std::vector<ReferenceGeneration>& cases = Decoder().cases;
  ASSERT_LE(cases.size(), static_cast<size_t>(Options().kv_cache.slots));
  std::vector<Logits> first;
  for (size_t i = 0; i < cases.size(); ++i) first.push_back(Prefill(cases[i].prompt_ids, static_cast<int>(i)));
  GreedyFromFirstLogits(first, "whole prefill");
}

// Chunked prefill against whole prefill on the real graphs: each case's prompt written in chunks of 32 and 128 in
// turn (so chunks start at positions that are not multiples of either, and cross KV buckets), its logits equal
// the whole prefill's within the cross-shape tolerance, and greedy generation from the chunked slots reproduces
// the reference token for token.
TEST_F(TorchGenerationBackendTest, ChunkedPrefillMatchesWholePrefillAndReproducesTheReference) {
  const GenerationOptions& g = Options();
  ASSERT_TRUE(g.chunked_prefill()) << "llama_tiny was exported without prefill_chunk_lengths";
  ASSERT_EQ(g.prefill_chunk_lengths, (std::vector<int64_t>{32, 128}));
  const std::vector<ReferenceGeneration>& cases = Decoder().cases;
  ASSERT_LE(cases.size(), static_cast<size_t>(g.kv_cache.slots));
  std::vector<Logits> first;
  float max_diff = 0;
  size_t multi_chunk = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t>& prompt = cases[i].prompt_ids;
    if (prompt.size() > 32) ++multi_chunk;
    // The whole prefill into the last slot, the chunks into slot i (kept for the decode below).
    Logits whole = Prefill(prompt, g.kv_cache.slots - 1);
    first.push_back(PrefillInChunks(prompt, static_cast<int>(i), {32, 128}));
    const float diff = MaxAbsDiff(first.back(), 0, whole, 0);
    EXPECT_LE(diff, Tolerance(whole, 0)) << "case " << i << " (" << prompt.size() << " prompt tokens)";
    max_diff = std::max(max_diff, diff);
  }
  EXPECT_GE(multi_chunk, 4u) << "too few reference prompts span several chunks";
  std::cout << "chunked (32, 128, ...) vs whole prefill: max abs diff " << max_diff << "\n";
  RecordProperty("max_abs_diff_chunked_vs_whole", std::to_string(max_diff));
  GreedyFromFirstLogits(first, "chunked prefill");
}

// What prefix caching relies on: a chunk rewrites only its own positions; the padding rows of a short chunk
// write into the scratch slot, never past the chunk in the real slot.
TEST_F(TorchGenerationBackendTest, AChunkLeavesTheSlotsLaterPositionsAlone) {
  const std::vector<int32_t>& prompt = Decoder().cases[3].prompt_ids;
  ASSERT_GT(prompt.size(), 20u);
  const int slot = 6;
  Logits first = Prefill(prompt, slot);
  const DecodeRow row{Argmax(first, 0), static_cast<int64_t>(prompt.size()), slot};
  Logits before = Decode(1, 256, {row});
  // Positions [0, 10) again, in the 32-token graph: 22 padding rows that must not reach positions 10..31.
  ASSERT_TRUE(Decoder()
                  .instance->PrefillChunk({32, 256, slot, 0, std::vector<int32_t>(prompt.begin(), prompt.begin() + 10)})
                  .ok());
  Logits after = Decode(1, 256, {row});
  EXPECT_LE(MaxAbsDiff(before, 0, after, 0), Tolerance(before, 0));
}

// Prefix caching's device op on the real graphs: a shared 64-token prefix written (with one request's tail) into
// slot 0, copied into slot 1 by CopyKv, a second request's tail prefilled after it by the chunk graphs; greedy
// generation from slot 1 is token-identical to the second request prefilled cold, whole-chunked, into slot 2.
TEST_F(TorchGenerationBackendTest, APrefixCopiedBetweenSlotsGeneratesTheColdRunsTokens) {
  std::vector<int32_t> shared, first, second;
  for (int i = 0; i < 64; ++i) shared.push_back(3 + (i * 37 + 5) % 1990);
  first = second = shared;
  for (int i = 0; i < 23; ++i) first.push_back(3 + (i * 11 + 7) % 1990);
  for (int i = 0; i < 29; ++i) second.push_back(3 + (i * 53 + 1) % 1990);
  PrefillInChunks(first, 0, {32});
  const absl::Status copied = Decoder().instance->CopyKv({0, 1, 0, 64});
  ASSERT_TRUE(copied.ok()) << copied;
  absl::StatusOr<Logits> tail = Decoder().instance->PrefillChunk(
      {32, 256, 1, 64, std::vector<int32_t>(second.begin() + 64, second.end())});
  ASSERT_TRUE(tail.ok()) << tail.status();
  const Logits cold = PrefillInChunks(second, 2, {32});
  EXPECT_LE(MaxAbsDiff(*tail, 0, cold, 0), Tolerance(cold, 0));
  auto greedy = [&](Logits logits, int slot) {
    std::vector<int32_t> out;
    for (int i = 0; i < 12; ++i) {
      out.push_back(Argmax(logits, 0));
      logits = Decode(1, 256, {{out.back(), static_cast<int64_t>(second.size()) + i, slot}});
    }
    return out;
  };
  EXPECT_EQ(greedy(*tail, 1), greedy(cold, 2));
  EXPECT_THAT(Decoder().instance->CopyKv({1, 1, 0, 8}).message(), HasSubstr("the same slot"));
}

TEST_F(TorchGenerationBackendTest, RefusesInputsOutsideTheCompiledShapes) {
  GenerationBackend& b = *Decoder().instance;
  const int slots = Options().kv_cache.slots;
  EXPECT_THAT(b.Prefill({100, 0, {1}}).status().message(), HasSubstr("prompt bucket not compiled"));
  EXPECT_THAT(b.Prefill({64, slots, {1}}).status().message(), HasSubstr("is outside [0, 16)"));
  EXPECT_THAT(b.Prefill({64, 0, {Options().vocab_size}}).status().message(), HasSubstr("token id"));
  EXPECT_THAT(b.Decode({3, 256, {{1, 0, 0}}}).status().message(), HasSubstr("batch size not compiled"));
  EXPECT_THAT(b.PrefillChunk({64, 256, 0, 0, {1}}).status().message(), HasSubstr("chunk length not compiled"));
  EXPECT_THAT(b.PrefillChunk({32, 256, 0, 250, std::vector<int32_t>(10, 1)}).status().message(),
              HasSubstr("[250, 260) do not fit in [0, 256)"));
  EXPECT_THAT(b.Decode({2, 256, {{1, 256, 0}}}).status().message(), HasSubstr("position 256 is outside [0, 256)"));
  EXPECT_THAT(b.Decode({2, 256, {{1, 3, 0}, {1, 4, 0}}}).status().message(), HasSubstr("used by another row"));
}

TEST(TorchGenerationBackendDeviceTest, CudaWithoutCudaIsAClearError) {
  ASSERT_TRUE(Decoder().config != nullptr);
  InstanceGroup group{1, DeviceKind::kCuda, std::nullopt, 1};
  absl::StatusOr<std::unique_ptr<GenerationBackend>> instance =
      GenerationBackend::Create({Decoder().config.get(), group, 0, 1});
  if (instance.ok()) GTEST_SKIP() << "this libtorch has CUDA: " << (*instance)->Describe();
  EXPECT_EQ(instance.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(instance.status().message(), HasSubstr("device cuda requested"));
}

}  // namespace
}  // namespace sluice
