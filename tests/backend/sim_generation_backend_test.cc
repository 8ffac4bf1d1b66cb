// The sim GenerationBackend (backend/sim_generation_backend.h): logits follow the written contract (values
// computed here by hand), depend on the slot's history so slot or position mix-ups show, padding never touches a
// real slot, latency follows the cost model, and inputs outside the compiled shapes are refused by name.
#include "backend/sim_generation_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "backend/backend.h"
#include "backend/base/model_config.h"
#include "backend/generation_backend.h"
#include "backend/model_repository.h"
#include "backend/sampler.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

constexpr char kConfig[] = R"(name: sim_llm
kind: generation
generation:
  tokenizer: tokenizer.model
  vocab_size: 1000
  context_length: 512
  kv_cache: {slots: 4, layers: 2, kv_heads: 1, head_dim: 8}
  prefill_lengths: [8, 32]
  decode_batch_sizes: [1, 2, 4]
  kv_lengths: [64, 512]
  prefill_chunk_lengths: [8, 16]
instances: [{count: 1, device: sim}]
sim: {base_ms: 2, per_sample_us: 100, faults: {gone_after_batches: GONE}}
)";

std::unique_ptr<ModelConfig> LoadConfig(int gone_after_batches = 0) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "sim_generation_test" / "sim_llm";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.model") << "unused by the sim";
  std::string text = kConfig;
  text.replace(text.find("GONE"), 4, std::to_string(gone_after_batches));
  absl::StatusOr<YamlNode> root = YamlNode::LoadString(text, (dir / "config.yaml").string());
  EXPECT_TRUE(root.ok()) << root.status();
  absl::StatusOr<ModelConfig> config = ParseModelConfig(*root, dir.string());
  EXPECT_TRUE(config.ok()) << config.status();
  return std::make_unique<ModelConfig>(*config);
}

class SimGenerationBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = LoadConfig();
    backend_ = Create(*config_);
  }

  std::unique_ptr<GenerationBackend> Create(const ModelConfig& config) {
    InstanceGroup group{1, DeviceKind::kSim, std::nullopt, 1};
    absl::StatusOr<std::unique_ptr<GenerationBackend>> backend =
        CreateSimGenerationBackend({&config, group, 0, 1}, [this](absl::Duration d) { slept_.push_back(d); });
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }

  static int Argmax(const Logits& logits, int row) {
    const float* values = logits.row(row);
    return static_cast<int>(std::max_element(values, values + logits.vocab) - values);
  }

  // The next token the backend gives `rows` decoded at once (batch 4, KV 512).
  static std::vector<int> DecodeTokens(GenerationBackend& backend, const std::vector<DecodeRow>& rows) {
    absl::StatusOr<Logits> logits = backend.Decode({4, 512, rows});
    EXPECT_TRUE(logits.ok()) << logits.status();
    std::vector<int> tokens;
    for (int r = 0; logits.ok() && r < logits->rows; ++r) tokens.push_back(Argmax(*logits, r));
    return tokens;
  }

  std::unique_ptr<ModelConfig> config_;
  std::unique_ptr<GenerationBackend> backend_;
  std::vector<absl::Duration> slept_;
};

TEST_F(SimGenerationBackendTest, PrefillLogitsFollowTheContract) {
  absl::StatusOr<Logits> logits = backend_->Prefill({8, 2, {5, 9, 3}});
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_EQ(logits->rows, 1);
  ASSERT_EQ(logits->vocab, 1000);
  // p = 2: 31 * 3 + 7 * 2 + (5 + 9 + 3) = 124.
  for (int id = 0; id < 1000; ++id) {
    const float want = id == 124 ? 10.0f : id == 125 ? 9.0f : 0.0f;
    ASSERT_EQ(logits->row(0)[id], want) << "id " << id;
  }
}

TEST_F(SimGenerationBackendTest, DecodeReadsTheSlotsHistory) {
  ASSERT_TRUE(backend_->Prefill({8, 2, {5, 9, 3}}).ok());
  ASSERT_TRUE(backend_->Prefill({32, 1, {7}}).ok());
  // Slot 2 after the write: [5, 9, 3, 124], p = 3: 31 * 124 + 21 + 141 = 4006 -> 6.
  // Slot 1 after the write: [7, 124], p = 1: 31 * 124 + 7 + 131 = 3982 -> 982.
  EXPECT_EQ(DecodeTokens(*backend_, {{124, 3, 2}, {124, 1, 1}}), (std::vector<int>{6, 982}));
  // The next step of slot 2 reads what the last one wrote: [5, 9, 3, 124, 6], p = 4: 186 + 28 + 147 = 361.
  EXPECT_EQ(DecodeTokens(*backend_, {{6, 4, 2}}), (std::vector<int>{361}));
  EXPECT_EQ(SimNextToken(std::vector<int32_t>{5, 9, 3, 124, 6}, 1000), 361);
}

TEST_F(SimGenerationBackendTest, AWrongSlotOrASkippedPositionChangesTheToken) {
  ASSERT_TRUE(backend_->Prefill({8, 0, {5, 9, 3}}).ok());
  ASSERT_TRUE(backend_->Prefill({8, 3, {4, 9, 3}}).ok());
  const int right = DecodeTokens(*backend_, {{124, 3, 0}})[0];
  EXPECT_NE(DecodeTokens(*backend_, {{124, 3, 3}})[0], right) << "same token and position, another slot";
  ASSERT_TRUE(backend_->Prefill({8, 0, {5, 9, 3}}).ok());
  EXPECT_NE(DecodeTokens(*backend_, {{124, 4, 0}})[0], right) << "position 3 skipped";
}

// sim: {picks_tokens: true}: a decode step with picks is answered with ids and no logits: the shared Sampler's
// draws from the contract's logits with each row's TokenPick (the same as the host would draw from the logits a
// twin without picks_tokens returns), greedy rows the contract's argmax; the step still takes its modeled time and
// writes the slots as always. Without picks, the logits come back.
TEST_F(SimGenerationBackendTest, WithPicksTokensDecodeStepsPickWhatTheHostSamplerWould) {
  ModelConfig picking = *config_;
  picking.sim->picks_tokens = true;
  std::unique_ptr<GenerationBackend> device = Create(picking);
  std::unique_ptr<GenerationBackend> host = Create(*config_);
  for (GenerationBackend* b : {device.get(), host.get()}) {
    ASSERT_TRUE(b->Prefill({8, 2, {5, 9, 3}}).ok());
    ASSERT_TRUE(b->Prefill({32, 1, {7}}).ok());
  }
  const std::vector<DecodeRow> rows = {{124, 3, 2}, {124, 1, 1}};
  Sampler sampler;
  int hot_draws = 0;
  for (double uniform : {0.05, 0.5, 0.731, 0.9999}) {
    // Temperature 1 over 1,000 ids: the two hot ids hold ~1/(1 + e^-1 + 998 e^-10) of the mass, so some draws land
    // in the flat tail; temperature 0.1 with top_p 0.5 keeps only the top id.
    const std::vector<TokenPick> picks = {{1.0f, 0, 1.0f, uniform}, {0.1f, 0, 0.5f, uniform}};
    slept_.clear();
    absl::StatusOr<Logits> picked = device->Decode({4, 512, rows, picks});
    ASSERT_TRUE(picked.ok()) << picked.status();
    EXPECT_TRUE(picked->values.empty());
    ASSERT_EQ(picked->picked.size(), 2u);
    EXPECT_EQ(slept_, std::vector<absl::Duration>{SimDecodeLatency(*config_->sim, 4, 512)});
    absl::StatusOr<Logits> logits = host->Decode({4, 512, rows, picks});
    ASSERT_TRUE(logits.ok()) << logits.status();
    ASSERT_TRUE(logits->picked.empty());
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(picked->picked[r], sampler.Sample(absl::MakeConstSpan(logits->row(r), 1000), picks[r]))
          << "row " << r << ", uniform " << uniform;
    }
    EXPECT_EQ(picked->picked[1], Argmax(*logits, 1));
    hot_draws += picked->picked[0] == Argmax(*logits, 0) ? 1 : 0;
  }
  EXPECT_GE(hot_draws, 2);
  EXPECT_EQ(DecodeTokens(*device, {{124, 3, 2}}), DecodeTokens(*host, {{124, 3, 2}})) << "the same slot histories";
}

TEST_F(SimGenerationBackendTest, PaddingRowsNeverTouchRealSlots) {
  // Two instances with the same history; one also runs a decode batch of 4 holding one real row.
  std::unique_ptr<GenerationBackend> twin = Create(*config_);
  for (GenerationBackend* b : {backend_.get(), twin.get()}) {
    for (int slot = 0; slot < 4; ++slot) ASSERT_TRUE(b->Prefill({8, slot, {1, 2, 3, slot}}).ok());
  }
  absl::StatusOr<Logits> padded = backend_->Decode({4, 64, {{17, 4, 2}}});
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ(padded->rows, 1);
  EXPECT_EQ(padded->values.size(), 1000u);
  std::vector<DecodeRow> others = {{11, 4, 0}, {12, 4, 1}, {13, 4, 3}};
  EXPECT_EQ(DecodeTokens(*backend_, others), DecodeTokens(*twin, others));
}

TEST_F(SimGenerationBackendTest, LatencyFollowsTheCostModel) {
  ASSERT_TRUE(backend_->Prefill({32, 0, {1, 2}}).ok());
  ASSERT_TRUE(backend_->Decode({2, 512, {{1, 2, 0}}}).ok());
  // Prefill: 2 ms + 100 us x 32; decode: 2 ms + 100 us x 2 x 512 / 64.
  EXPECT_EQ(slept_, (std::vector<absl::Duration>{absl::Microseconds(5200), absl::Microseconds(3600)}));
  EXPECT_EQ(SimPrefillLatency(*config_->sim, 8), absl::Microseconds(2800));
  EXPECT_EQ(SimDecodeLatency(*config_->sim, 4, 64), absl::Microseconds(2400));
}

TEST_F(SimGenerationBackendTest, ChunksContinueWhatTheSlotHoldsAndMatchAWholePrefill) {
  absl::StatusOr<Logits> whole = backend_->Prefill({8, 0, {5, 9, 3, 7, 8}});
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(backend_->PrefillChunk({8, 64, 1, 0, {5, 9}}).ok());
  absl::StatusOr<Logits> chunked = backend_->PrefillChunk({8, 64, 1, 2, {3, 7, 8}});
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_EQ(chunked->values, whole->values);
  const int next = Argmax(*whole, 0);
  EXPECT_EQ(DecodeTokens(*backend_, {{next, 5, 1}}), DecodeTokens(*backend_, {{next, 5, 0}}));
  // Chunk latency: 2 ms + 100 us x the chunk length (8).
  EXPECT_EQ(slept_[1], absl::Microseconds(2800));
  EXPECT_EQ(SimPrefillChunkLatency(*config_->sim, 16, 512), absl::Microseconds(3600));
}

// Prefix caching: positions copied from another slot, then the rest chunked, give a whole prefill's logits.
TEST_F(SimGenerationBackendTest, ACopiedPrefixPlusAChunkMatchesAWholePrefill) {
  absl::StatusOr<Logits> whole = backend_->Prefill({8, 0, {5, 9, 3, 7, 8}});
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(backend_->CopyKv({0, 2, 0, 4}).ok());
  absl::StatusOr<Logits> rest = backend_->PrefillChunk({8, 64, 2, 4, {8}});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(rest->values, whole->values);
  // Copy latency: 100 us x 4 positions / 64.
  EXPECT_EQ(slept_[1], absl::Microseconds(6.25));
  EXPECT_THAT(backend_->CopyKv({1, 1, 0, 4}).message(), HasSubstr("the same slot"));
  EXPECT_THAT(backend_->CopyKv({0, 1, 500, 20}).message(), HasSubstr("outside [0, context_length 512)"));
}

TEST_F(SimGenerationBackendTest, AChunkLeavesTheSlotsLaterPositionsAlone) {
  std::unique_ptr<GenerationBackend> twin = Create(*config_);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  for (GenerationBackend* b : {backend_.get(), twin.get()}) ASSERT_TRUE(b->Prefill({32, 2, prompt}).ok());
  // Positions [0, 3) rewritten with what they hold: positions 3..9 must keep theirs.
  ASSERT_TRUE(backend_->PrefillChunk({16, 64, 2, 0, {1, 2, 3}}).ok());
  EXPECT_EQ(DecodeTokens(*backend_, {{11, 10, 2}}), DecodeTokens(*twin, {{11, 10, 2}}));
}

TEST_F(SimGenerationBackendTest, RefusesInputsOutsideTheCompiledShapes) {
  struct Bad {
    std::function<absl::Status()> call;
    const char* message;
  };
  GenerationBackend& b = *backend_;
  const std::vector<Bad> cases = {
      {[&] { return b.Prefill({16, 0, {1}}).status(); }, "prefill (prompt bucket 16): prompt bucket not compiled"},
      {[&] { return b.Prefill({8, 0, {}}).status(); }, "0 prompt tokens, expected 1 to 8"},
      {[&] { return b.Prefill({8, 0, std::vector<int32_t>(9, 1)}).status(); }, "9 prompt tokens, expected 1 to 8"},
      {[&] { return b.Prefill({8, 4, {1}}).status(); }, "slot 4 is outside [0, 4)"},
      {[&] { return b.Prefill({8, -1, {1}}).status(); }, "slot -1 is outside [0, 4)"},
      {[&] { return b.Prefill({8, 0, {1, 1000}}).status(); }, "token id 1000 is outside [0, vocab_size 1000)"},
      {[&] { return b.Prefill({8, 0, {-3}}).status(); }, "token id -3 is outside"},
      {[&] { return b.PrefillChunk({4, 64, 0, 0, {1}}).status(); }, "chunk 4, KV length 64): chunk length not"},
      {[&] { return b.PrefillChunk({8, 128, 0, 0, {1}}).status(); }, "KV length not compiled"},
      {[&] { return b.PrefillChunk({8, 64, 0, 0, {}}).status(); }, "0 tokens, expected 1 to 8"},
      {[&] { return b.PrefillChunk({8, 64, 0, 60, {1, 2, 3, 4, 5}}).status(); }, "[60, 65) do not fit in [0, 64)"},
      {[&] { return b.PrefillChunk({8, 64, 0, -1, {1}}).status(); }, "[-1, 0) do not fit"},
      {[&] { return b.PrefillChunk({8, 64, 4, 0, {1}}).status(); }, "slot 4 is outside [0, 4)"},
      {[&] { return b.Decode({3, 64, {{1, 0, 0}}}).status(); }, "decode (batch 3, KV length 64): batch size not"},
      {[&] { return b.Decode({2, 128, {{1, 0, 0}}}).status(); }, "KV length not compiled"},
      {[&] { return b.Decode({2, 64, {}}).status(); }, "0 rows, expected 1 to 2"},
      {[&] { return b.Decode({2, 64, {{1, 0, 0}, {1, 0, 1}, {1, 0, 2}}}).status(); }, "3 rows, expected 1 to 2"},
      {[&] { return b.Decode({2, 64, {{1, 0, 1}, {1, 5, 1}}}).status(); }, "row 1: slot 1 is used by another row"},
      {[&] { return b.Decode({2, 64, {{1, 0, 4}}}).status(); }, "row 0: slot 4 is outside [0, 4)"},
      {[&] { return b.Decode({2, 64, {{1, 0, 0}, {1, 64, 1}}}).status(); }, "row 1: position 64 is outside [0, 64)"},
      {[&] { return b.Decode({2, 64, {{1, -1, 0}}}).status(); }, "position -1 is outside"},
      {[&] { return b.Decode({2, 64, {{2000, 0, 0}}}).status(); }, "token id 2000 is outside"},
  };
  for (const Bad& bad : cases) {
    absl::Status status = bad.call();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr("sim_llm")) << status;
    EXPECT_THAT(status.message(), HasSubstr(bad.message)) << status;
  }
  EXPECT_TRUE(slept_.empty()) << "refused inputs cost no device time";
}

TEST_F(SimGenerationBackendTest, DescribesItselfAndListsEveryGraph) {
  EXPECT_EQ(backend_->Describe(), "sim_llm#0 on sim (KV cache 4 slots x 512 positions, 0.3 MB simulated)");
  ASSERT_EQ(backend_->load_stats().size(), 2u + 2u + 3u * 2u);  // prefill, chunk, decode graphs
  EXPECT_EQ(backend_->load_stats()[3].length, 16);
  EXPECT_EQ(backend_->load_stats()[1].batch_size, 1);
  EXPECT_EQ(backend_->load_stats()[1].length, 32);
  EXPECT_EQ(backend_->load_stats().back().batch_size, 4);
  EXPECT_EQ(backend_->load_stats().back().length, 512);
}

TEST(SimGenerationFaultsTest, TheDeviceGoesAwayAfterTheConfiguredCalls) {
  std::unique_ptr<ModelConfig> config = LoadConfig(/*gone_after_batches=*/2);
  InstanceGroup group{1, DeviceKind::kSim, std::nullopt, 1};
  absl::StatusOr<std::unique_ptr<GenerationBackend>> backend =
      CreateSimGenerationBackend({config.get(), group, 0, 1}, [](absl::Duration) {});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_TRUE((*backend)->Prefill({8, 0, {1}}).ok());
  EXPECT_TRUE((*backend)->Decode({1, 64, {{1, 1, 0}}}).ok());
  EXPECT_EQ((*backend)->Decode({1, 64, {{1, 2, 0}}}).status().code(), absl::StatusCode::kUnavailable);
}

TEST(GenerationBackendFactoryTest, ChoosesBySeamAndRefusesTheOtherKind) {
  std::unique_ptr<ModelConfig> config = LoadConfig();
  InstanceGroup group{1, DeviceKind::kSim, std::nullopt, 1};
  absl::StatusOr<std::unique_ptr<GenerationBackend>> sim = GenerationBackend::Create({config.get(), group, 0, 1});
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_THAT((*sim)->Describe(), HasSubstr("on sim"));
  absl::StatusOr<std::unique_ptr<Backend>> batched = Backend::Create({config.get(), group, 0, 1});
  EXPECT_EQ(batched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(batched.status().message(), HasSubstr("is a generation model"));

  ModelConfig not_generation = *config;
  not_generation.generation.reset();
  absl::StatusOr<std::unique_ptr<GenerationBackend>> refused =
      GenerationBackend::Create({&not_generation, group, 0, 1});
  EXPECT_THAT(refused.status().message(), HasSubstr("is not a generation model"));
}

TEST(GenerationRepositoryTest, LoadsAGenerationModelIntoGenerationInstances) {
  const std::filesystem::path repo = std::filesystem::path(::testing::TempDir()) / "sim_generation_repo";
  const std::filesystem::path dir = repo / "sim_llm";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.model") << "unused by the sim";
  std::string text = kConfig;
  text.replace(text.find("count: 1"), 8, "count: 3");
  text.replace(text.find("GONE"), 4, "0");
  std::ofstream(dir / "config.yaml") << text;
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository = ModelRepository::Load({repo.string()});
  ASSERT_TRUE(repository.ok()) << repository.status();
  const LoadedModel* model = (*repository)->Find("sim_llm");
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->instances.empty());
  ASSERT_EQ(model->generation_instances.size(), 3u);
  EXPECT_THAT(model->generation_instances[2]->Describe(), HasSubstr("sim_llm#2 on sim"));
}

}  // namespace
}  // namespace sluice
