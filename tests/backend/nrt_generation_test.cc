// llama_tiny (a generation model: prefill and decode graphs over a resident KV cache) through the Neuron Runtime
// backend and the fake libnrt, whose stand-in NEFFs run the exported prefill/decode TorchScript graphs over the
// bytes sluice bound (make_nrt_example_models.py): each replica allocates ONE K and ONE V cache tensor whatever
// its 20 NEFFs, binds it to every NEFF as an input and as the output that aliases it (the fake refuses an
// execution whose aliased output is another tensor), and the KV that prefill writes there is what decode reads —
// the logits equal the TorchScript backend's for the same prompts, slots and steps within tests/float_tolerance.h.
// UNVERIFIED ON HARDWARE: a real NEFF's aliasing and libnrt's behaviour are not exercised.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/base/model_config.h"
#include "backend/base/yaml_node.h"
#include "backend/generation_backend.h"
#include "backend/generation_inputs.h"
#include "backend/nrt/neff_manifest.h"
#include "backend/nrt/safetensors_file.h"
#include "tests/backend/fake_nrt_controls.h"
#include "tests/float_tolerance.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::FakeNrt;

absl::StatusOr<std::unique_ptr<GenerationBackend>> CreateReplica(const ModelConfig& config, int replica,
                                                                  int warmup_runs) {
  InstanceOptions options;
  options.model = &config;
  options.group = config.instances[0];
  if (options.group.cores) options.group.cores = ReplicaCores(*options.group.cores, options.group.count, replica);
  options.replica = replica;
  options.warmup_runs = warmup_runs;
  return GenerationBackend::Create(options);
}

void ExpectClose(const Logits& got, const Logits& want, const std::string& what) {
  ASSERT_EQ(got.rows, want.rows) << what;
  ASSERT_EQ(got.values.size(), want.values.size()) << what;
  for (int r = 0; r < want.rows; ++r) {
    std::span<const float> w(want.row(r), want.vocab), g(got.row(r), got.vocab);
    double worst = 0;
    for (size_t i = 0; i < w.size(); ++i) worst = std::max(worst, std::abs(double{g[i]} - w[i]));
    EXPECT_LE(worst, testing::CrossShapeTolerance(w)) << what << " row " << r;
  }
}

int Argmax(const Logits& logits, int row) {
  return static_cast<int>(std::max_element(logits.row(row), logits.row(row) + logits.vocab) - logits.row(row));
}

class NrtGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(fake_.handle, nullptr) << dlerror();
    fake_.reset();
    unsetenv("NEURON_RT_VISIBLE_CORES");
    absl::StatusOr<ModelConfig> torch_config = LoadModelConfig(absl::StrCat(SLUICE_MODELS_DIR, "/llama_tiny"));
    absl::StatusOr<ModelConfig> nrt_config = LoadModelConfig(absl::StrCat(SLUICE_NRT_MODELS_DIR, "/llama_tiny_nrt"));
    ASSERT_TRUE(torch_config.ok()) << torch_config.status();
    ASSERT_TRUE(nrt_config.ok()) << nrt_config.status();
    torch_config_ = std::make_unique<ModelConfig>(*std::move(torch_config));
    nrt_config_ = std::make_unique<ModelConfig>(*std::move(nrt_config));
  }
  FakeNrt fake_{SLUICE_FAKE_LIBNRT};
  std::unique_ptr<ModelConfig> torch_config_, nrt_config_;
};

TEST_F(NrtGenerationTest, OneCacheSetPerReplicaBoundToEveryNeffAndDecodeReadsWhatPrefillWrote) {
  const GenerationOptions& g = *nrt_config_->generation;
  ASSERT_EQ(nrt_config_->instances[0].count, 2);
  const int first_core = nrt_config_->instances[0].cores->first;
  const int neffs = static_cast<int>(g.prefill_lengths.size() + g.decode_batch_sizes.size() * g.kv_lengths.size());
  absl::StatusOr<SafetensorsFile> weights =
      SafetensorsFile::Open(absl::StrCat(SLUICE_NRT_MODELS_DIR, "/llama_tiny_nrt/weights.safetensors"));
  ASSERT_TRUE(weights.ok()) << weights.status();
  const int weight_count = static_cast<int>(weights->tensors().size());

  absl::StatusOr<std::unique_ptr<GenerationBackend>> reference = CreateReplica(*torch_config_, 0, 0);
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::vector<std::unique_ptr<GenerationBackend>> replicas;
  for (int replica = 0; replica < 2; ++replica) {
    // Replica 0 is warmed (every NEFF runs, into the scratch slot only), replica 1 not: both must answer alike.
    absl::StatusOr<std::unique_ptr<GenerationBackend>> backend = CreateReplica(*nrt_config_, replica, 1 - replica);
    ASSERT_TRUE(backend.ok()) << backend.status();
    replicas.push_back(*std::move(backend));
  }
  ASSERT_EQ(fake_.counter("loads"), 2 * neffs);
  for (int i = 0; i < 2 * neffs; ++i) EXPECT_EQ(fake_.load_arg(i, 0), first_core + i / neffs) << "load " << i;
  // One K and one V cache per replica, whatever the NEFF count; one copy of each weight per replica.
  EXPECT_EQ(fake_.allocations_named("cache:"), 2 * 2) << neffs << " NEFFs per replica";
  EXPECT_EQ(fake_.allocations_named("weight:"), 2 * weight_count);
  EXPECT_EQ(fake_.counter("execute"), neffs) << "replica 0's warm-up: one run per NEFF";
  EXPECT_EQ(replicas[0]->memory().cache_bytes, KvCacheBytes(g));
  EXPECT_EQ(replicas[0]->memory().graphs, neffs);
  EXPECT_THAT(replicas[1]->Describe(), HasSubstr("NeuronCore 5 of the visible"));

  // Three prompts into three slots, prompt buckets 64 and 128, then greedy decode steps over batch buckets 1, 2
  // and 4 at KV lengths 256 and 512: decode attends over the KV prefill wrote in the shared cache.
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 17, 250, 3, 99}, {1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
                            28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
                            50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70},
      {1, 1999, 42}};
  const std::vector<int> slots = {3, 0, 15};
  std::vector<std::vector<DecodeRow>> rows(replicas.size() + 1);  // [0]: the reference, then each replica
  auto prefill = [&](GenerationBackend& backend, size_t p) -> absl::StatusOr<Logits> {
    const int64_t bucket = prompts[p].size() <= 64 ? 64 : 128;
    return backend.Prefill({bucket, slots[p], prompts[p]});
  };
  for (size_t p = 0; p < prompts.size(); ++p) {
    absl::StatusOr<Logits> want = prefill(**reference, p);
    ASSERT_TRUE(want.ok()) << want.status();
    for (size_t r = 0; r < replicas.size(); ++r) {
      absl::StatusOr<Logits> got = prefill(*replicas[r], p);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectClose(*got, *want, absl::StrCat("prefill of prompt ", p, " on replica ", r));
    }
    // Every backend continues with the reference's greedy token, so all decode the same sequences.
    const DecodeRow row{Argmax(*want, 0), static_cast<int64_t>(prompts[p].size()), slots[p]};
    for (auto& r : rows) r.push_back(row);
  }
  const std::vector<std::pair<int, int64_t>> steps = {{4, 256}, {4, 256}, {2, 512}, {1, 256}, {4, 512}};
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto [batch, kv_length] = steps[s];
    const size_t n = std::min<size_t>(batch, rows[0].size());
    auto decode = [&](GenerationBackend& backend, const std::vector<DecodeRow>& all) {
      return backend.Decode({batch, kv_length, std::vector<DecodeRow>(all.begin(), all.begin() + n)});
    };
    absl::StatusOr<Logits> want = decode(**reference, rows[0]);
    ASSERT_TRUE(want.ok()) << want.status();
    for (size_t r = 0; r < replicas.size(); ++r) {
      absl::StatusOr<Logits> got = decode(*replicas[r], rows[r + 1]);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectClose(*got, *want, absl::StrCat("decode step ", s, " (batch ", batch, ", KV ", kv_length, ") replica ", r));
    }
    for (size_t i = 0; i < n; ++i) {
      for (auto& r : rows) r[i] = {Argmax(*want, static_cast<int>(i)), r[i].position + 1, r[i].slot};
    }
  }
  EXPECT_EQ(fake_.allocations_named("cache:"), 2 * 2) << "executing allocates no caches";

  replicas.clear();
  EXPECT_EQ(fake_.counter("unloads"), 2 * neffs);
  EXPECT_EQ(fake_.counter("live_tensors"), 0);
  EXPECT_EQ(fake_.counter("live_sets"), 0);
  EXPECT_EQ(fake_.counter("close"), 1);
}

// The manifest's generation layout, and what is refused: a NEFF that does not bind a cache (the manifest), and
// write-backs bound to the other cache's tensor (the fake, as a NEFF whose outputs alias its cache inputs, refuses
// the execution: so the passing test above really had each cache's input and output on one tensor).
TEST_F(NrtGenerationTest, RefusesAnUnboundCacheAndWriteBacksBoundToAnotherTensor) {
  const std::filesystem::path source = absl::StrCat(SLUICE_NRT_MODELS_DIR, "/llama_tiny_nrt");
  absl::StatusOr<YamlNode> root = YamlNode::LoadFile((source / "neff_manifest.yaml").string());
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<NeffManifest> parsed = ParseNeffManifest(*root, *nrt_config_);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->buckets.size(), 20u);
  EXPECT_EQ(parsed->buckets.front().graph, NeffGraph::kPrefill);
  EXPECT_EQ(parsed->buckets.back().graph, NeffGraph::kDecode);
  EXPECT_EQ(parsed->buckets.back().length, 1024);  // decode (16, 1024): length is the KV length

  std::ifstream in(source / "neff_manifest.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  // The first NEFF (prefill_l64) without both of its v_cache bindings (input43 and its write-back output2).
  std::string missing = text;
  for (const std::string line : {"      - {tensor: input43, role: cache, name: v_cache}\n",
                                 "      - {tensor: output2, role: cache, name: v_cache}\n"}) {
    ASSERT_NE(missing.find(line), std::string::npos) << line;
    missing.erase(missing.find(line), line.size());
  }
  absl::StatusOr<YamlNode> bad = YamlNode::LoadString(missing, "neff_manifest.yaml");
  ASSERT_TRUE(bad.ok()) << bad.status();
  absl::StatusOr<NeffManifest> refused = ParseNeffManifest(*bad, *nrt_config_);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("cache 'v_cache' is not bound"));
  EXPECT_THAT(refused.status().message(), HasSubstr("prefill_l64.neff"));

  // A decode input named other than the graph's argument.
  std::string misnamed = text;
  misnamed.replace(misnamed.find("name: positions}"), 16, "name: position}");
  absl::StatusOr<YamlNode> misnamed_root = YamlNode::LoadString(misnamed, "neff_manifest.yaml");
  ASSERT_TRUE(misnamed_root.ok()) << misnamed_root.status();
  refused = ParseNeffManifest(*misnamed_root, *nrt_config_);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("a decode NEFF's inputs are tokens, positions, slots, not 'position'"));

  // output1 (aliasing k_cache's input) bound to v_cache and output2 to k_cache, in every NEFF.
  std::string swapped = text;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"{tensor: output1, role: cache, name: k_cache}", "{tensor: output1, role: cache, name: SWAP}"},
           {"{tensor: output2, role: cache, name: v_cache}", "{tensor: output2, role: cache, name: k_cache}"},
           {"{tensor: output1, role: cache, name: SWAP}", "{tensor: output1, role: cache, name: v_cache}"}}) {
    for (size_t at; (at = swapped.find(from)) != std::string::npos;) swapped.replace(at, from.size(), to);
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sluice_nrt_swapped_" + std::to_string(::getpid())) / "llama_tiny_nrt";
  std::filesystem::remove_all(dir.parent_path());
  std::filesystem::create_directories(dir);
  for (const char* file : {"config.yaml", "tokenizer.model"}) std::filesystem::copy_file(source / file, dir / file);
  for (const char* link : {"weights.safetensors", "neffs"}) std::filesystem::create_symlink(source / link, dir / link);
  std::ofstream(dir / "neff_manifest.yaml") << swapped;
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir.string());
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<GenerationBackend>> backend = CreateReplica(*config, 0, 1);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(), HasSubstr("nrt_execute failed with NRT_EXEC_BAD_INPUT"));
  EXPECT_THAT(backend.status().message(), HasSubstr("prefill_l64.neff"));
  EXPECT_EQ(fake_.counter("live_tensors"), 0) << "the refused instance released everything";
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace sluice
