// Neuron core placement (issue 18) up to the edge of the hardware: every graph of replica r must load while the
// Neuron runtime's default placement is replica r's cores, for the stateless and the generation backend. The
// runtime is tests/backend/fake_torchneuron.cc (libtorchneuron's class names, no Neuron code), loaded as the
// instance group's neuron_library; its graphs are CPU TorchScript holding a fake neuron.Model, whose unpickling
// records the placement it was loaded under. Nothing here proves what the real libtorchneuron.so does.
#include "backend/neuron_placement.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/model_repository.h"
#include "backend/neuron_runtime.h"
#include "tests/backend/test_models.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kFakeLibrary[] = SLUICE_FAKE_TORCHNEURON;  // the built fake_torchneuron.so (CMake)

// The fake library, loaded the way sluice loads a neuron_library (so the handles are the same).
class FakeNeuron {
 public:
  FakeNeuron() {
    EXPECT_TRUE(LoadNeuronLibrary(kFakeLibrary).ok());
    handle_ = dlopen(kFakeLibrary, RTLD_NOW | RTLD_NOLOAD);
    EXPECT_NE(handle_, nullptr) << dlerror();
    Reset();
  }

  void Reset() { Call<void (*)()>("sluice_fake_neuron_reset")(); }

  std::vector<std::string> Log() {
    return absl::StrSplit(Call<const char* (*)()>("sluice_fake_neuron_log")(), '\n', absl::SkipEmpty());
  }

  // Only the lines that start with `prefix`.
  std::vector<std::string> Log(const std::string& prefix) {
    std::vector<std::string> lines;
    for (const std::string& line : Log()) {
      if (line.rfind(prefix, 0) == 0) lines.push_back(line);
    }
    return lines;
  }

  void WriteGraph(const fs::path& path, const std::string& kind, const std::string& tag, int vocab = 0) {
    fs::create_directories(path.parent_path());
    char error[512] = "";
    auto write = Call<int (*)(const char*, const char*, const char*, int, char*, size_t)>(
        "sluice_fake_neuron_write_graph");
    ASSERT_EQ(write(path.c_str(), kind.c_str(), tag.c_str(), vocab, error, sizeof(error)), 0) << error;
  }

 private:
  template <typename F>
  F Call(const char* name) {
    void* symbol = handle_ ? dlsym(handle_, name) : nullptr;
    if (symbol == nullptr) throw std::runtime_error(absl::StrCat("fake_torchneuron has no ", name));
    return reinterpret_cast<F>(symbol);
  }

  void* handle_ = nullptr;
};

fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("neuron_placement_", getpid()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void WriteFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A stateless model `name` in `repo`: buckets lengths {8, 16} x batch sizes {1, 2}, one group of 2 neuron
// replicas over `cores`; its four graphs are tagged b<B>_l<L>.
void WriteStatelessModel(FakeNeuron& fake, const fs::path& repo, const std::string& name, const std::string& cores) {
  const fs::path dir = repo / name;
  WriteFile(dir / "config.yaml",
            absl::StrCat("name: ", name, "\n",
                         "kind: generic\n"
                         "inputs: [{name: x, dtype: FP32, shape: [-1]}]\n"
                         "outputs: [{name: y, dtype: FP32, shape: [-1]}]\n"
                         "buckets: {lengths: [8, 16], batch_sizes: [1, 2]}\n"
                         "instances: [{count: 2, device: neuron, cores: \"",
                         cores, "\", neuron_library: ", kFakeLibrary, "}]\n"));
  for (int b : {1, 2}) {
    for (int l : {8, 16}) {
      const std::string tag = absl::StrCat("b", b, "_l", l);
      fake.WriteGraph(dir / "graphs" / (tag + ".pt"), "bucket", tag);
    }
  }
}

// What replica r's graphs must have been loaded under, for `tags` in load order.
std::vector<std::string> LoadedOn(const std::vector<std::string>& tags, int start_nc, int nc_count) {
  std::vector<std::string> lines;
  for (const std::string& tag : tags) {
    lines.push_back(absl::StrCat("load ", tag, " start_nc ", start_nc, " nc_count ", nc_count));
  }
  return lines;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class NeuronPlacementTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv(kNeuronVisibleCoresEnv); }
  void TearDown() override { unsetenv(kNeuronVisibleCoresEnv); }
};

TEST_F(NeuronPlacementTest, StartCountsFromTheFirstVisibleCore) {
  EXPECT_EQ(*NeuronPlacementWithinVisible({0, 1}, "0-3"), (NeuronCorePlacement{0, 2}));
  EXPECT_EQ(*NeuronPlacementWithinVisible({2, 3}, "0-3"), (NeuronCorePlacement{2, 2}));
  EXPECT_EQ(*NeuronPlacementWithinVisible({4, 5}, "4-7"), (NeuronCorePlacement{0, 2}));  // AWS: "3,4" are 0 and 1
  EXPECT_EQ(*NeuronPlacementWithinVisible({6, 6}, "4,5-7"), (NeuronCorePlacement{2, 1}));
  EXPECT_EQ(*NeuronPlacementWithinVisible({3, 5}, ""), (NeuronCorePlacement{3, 3}));  // unset: all, from 0
}

TEST_F(NeuronPlacementTest, CoresOutsideTheVisibleOnesAreAnError) {
  absl::StatusOr<NeuronCorePlacement> outside = NeuronPlacementWithinVisible({2, 3}, "0-2");
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(outside.status().message(),
              HasSubstr("NeuronCore 3 of cores 2-3 is not in NEURON_RT_VISIBLE_CORES='0-2'"));
  EXPECT_EQ(NeuronPlacementWithinVisible({0, 0}, "0-x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(NeuronPlacementTest, StatelessReplicasLoadEveryGraphOntoTheirOwnCores) {
  FakeNeuron fake;
  const fs::path repo = FreshDir("stateless");
  WriteStatelessModel(fake, repo, "placed", "0-3");
  fake.Reset();

  auto loaded = ModelRepository::Load({repo.string(), {}, /*warmup_runs=*/1});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_STREQ(std::getenv(kNeuronVisibleCoresEnv), "0-3");
  const std::vector<std::string> tags = {"b1_l8", "b1_l16", "b2_l8", "b2_l16"};  // LoadAll's order
  EXPECT_EQ(fake.Log("load "), Concat(LoadedOn(tags, 0, 2), LoadedOn(tags, 2, 2)));
  // Each load set the replica's cores and put the default (-1, -1) back.
  const std::vector<std::string> sets = fake.Log("set_default_neuron_cores");
  ASSERT_EQ(sets.size(), 16u);
  for (size_t i = 0; i < sets.size(); i += 2) {
    EXPECT_EQ(sets[i], i < 8 ? "set_default_neuron_cores 0 2" : "set_default_neuron_cores 2 2");
    EXPECT_EQ(sets[i + 1], "set_default_neuron_cores -1 -1");
  }
  // The placed graphs ran (warm-up, then a batch) through the ordinary CPU path.
  const LoadedModel* model = (*loaded)->Find("placed");
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->instances.size(), 2u);
  EXPECT_THAT(model->instances[1]->Describe(), HasSubstr("neuron cores 2-3 (start_nc 2, nc_count 2)"));
  PaddedBatch batch{1, 8, {HostTensor::Zeros(DataType::kFp32, {1, 8})}, {8}};
  EXPECT_TRUE(model->instances[1]->Execute(batch).ok());
}

TEST_F(NeuronPlacementTest, StartIsRelativeToTheOperatorsVisibleCores) {
  FakeNeuron fake;
  const fs::path repo = FreshDir("operator_visible");
  WriteStatelessModel(fake, repo, "placed", "4-7");
  fake.Reset();
  setenv(kNeuronVisibleCoresEnv, "2-7", 1);  // set by the operator, covering the config's cores

  auto loaded = ModelRepository::Load({repo.string(), {}, /*warmup_runs=*/0});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<std::string> tags = {"b1_l8", "b1_l16", "b2_l8", "b2_l16"};
  EXPECT_EQ(fake.Log("load "), Concat(LoadedOn(tags, 2, 2), LoadedOn(tags, 4, 2)));
}

TEST_F(NeuronPlacementTest, GenerationReplicasLoadEveryGraphOntoTheirOwnCores) {
  FakeNeuron fake;
  const fs::path repo = FreshDir("generation");
  const fs::path dir = repo / "placed_llm";
  fs::create_directories(dir / "graphs");
  fs::copy_file(fs::path(testing::ExampleModelDir("llama_tiny")) / "tokenizer.model", dir / "tokenizer.model");
  WriteFile(dir / "config.yaml",
            absl::StrCat("name: placed_llm\n"
                         "kind: generation\n"
                         "generation:\n"
                         "  tokenizer: tokenizer.model\n"
                         "  vocab_size: 2000\n"
                         "  context_length: 32\n"
                         "  kv_cache: {slots: 2, layers: 1, kv_heads: 1, head_dim: 4}\n"
                         "  prefill_lengths: [16, 32]\n"
                         "  decode_batch_sizes: [1, 2]\n"
                         "  kv_lengths: [32]\n"
                         "  bos_token_id: 1\n"
                         "  eos_token_id: 2\n"
                         "  max_num_seqs: 2\n"
                         "  prefill_token_budget: 32\n"
                         "instances: [{count: 2, device: neuron, cores: \"0-3\", neuron_library: ",
                         kFakeLibrary, "}]\n"));
  const std::vector<std::string> tags = {"prefill_l16", "prefill_l32", "decode_b1_k32", "decode_b2_k32"};
  for (const std::string& tag : tags) {
    fake.WriteGraph(dir / "graphs" / (tag + ".pt"), tag.rfind("prefill", 0) == 0 ? "prefill" : "decode", tag,
                    2000);
  }
  fake.Reset();

  auto loaded = ModelRepository::Load({repo.string(), {}, /*warmup_runs=*/1});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(fake.Log("load "), Concat(LoadedOn(tags, 0, 2), LoadedOn(tags, 2, 2)));
  const LoadedModel* model = (*loaded)->Find("placed_llm");
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->generation_instances.size(), 2u);
  EXPECT_THAT(model->generation_instances[0]->Describe(), HasSubstr("neuron cores 0-1 (start_nc 0, nc_count 2)"));
}

TEST_F(NeuronPlacementTest, PlacementPastTheRuntimesVisibleCoresFailsBeforeLoading) {
  FakeNeuron fake;
  setenv(kNeuronVisibleCoresEnv, "0-3", 1);  // the fake runtime then sees 4 cores
  bool loaded = false;
  absl::Status status = WithNeuronCoreDefaults({3, 2}, [&] {
    loaded = true;
    return absl::OkStatus();
  });
  EXPECT_FALSE(loaded);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("Neuron core placement (start_nc 3, nc_count 2): the Neuron runtime sees "
                                          "4 NeuronCores"));
  EXPECT_THAT(fake.Log("set_default_neuron_cores"), ::testing::IsEmpty());
}

TEST_F(NeuronPlacementTest, TheDefaultIsRestoredWhenTheLoadFails) {
  FakeNeuron fake;
  absl::Status status = WithNeuronCoreDefaults({1, 1}, [] { return absl::NotFoundError("no such graph"); });
  EXPECT_EQ(status, absl::NotFoundError("no such graph"));
  EXPECT_THAT(fake.Log(), ElementsAre("set_default_neuron_cores 1 1", "set_default_neuron_cores -1 -1"));

  fake.Reset();
  EXPECT_THROW((void)WithNeuronCoreDefaults({1, 1}, []() -> absl::Status { throw std::runtime_error("boom"); }),
               std::runtime_error);
  EXPECT_THAT(fake.Log(), ElementsAre("set_default_neuron_cores 1 1", "set_default_neuron_cores -1 -1"));
}

TEST_F(NeuronPlacementTest, ALibraryWithoutThePlacementApiIsAClearError) {
  FakeNeuron fake;  // registers torch.classes.sluice_fake_old.Runtime, which has only get_visible_nc_count
  bool loaded = false;
  auto load = [&] {
    loaded = true;
    return absl::OkStatus();
  };
  absl::Status old = WithNeuronCoreDefaults({0, 1}, load, "__torch__.torch.classes.sluice_fake_old.Runtime");
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(old.message(), HasSubstr("torch.classes.sluice_fake_old.Runtime has no method get_default_start_nc, "
                                       "get_default_nc_count, set_default_neuron_cores"));

  absl::Status none = WithNeuronCoreDefaults({0, 1}, load, "__torch__.torch.classes.sluice_absent.Runtime");
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.message(), HasSubstr("no TorchScript class torch.classes.sluice_absent.Runtime is registered"));
  EXPECT_FALSE(loaded);
}

}  // namespace
}  // namespace sluice
