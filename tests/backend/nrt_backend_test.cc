// The Neuron Runtime backend (device neuron, runtime nrt) against the fake libnrt (fake_libnrt.cc): loading,
// tensor binding, one device copy of each weight and cache whatever the bucket count, each replica's core,
// every failing libnrt call named with its status, and nrt_close at shutdown.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/backend.h"
#include "backend/base/model_config.h"
#include "backend/nrt/nrt_api.h"
#include "backend/nrt/safetensors_file.h"
#include "tests/backend/fake_nrt_controls.h"
#include "tests/backend/nrt_toy_model.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::FakeNrt;
using testing::NrtToyModel;

class NrtBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(fake_.handle, nullptr) << dlerror();
    fake_.reset();
    unsetenv("NEURON_RT_VISIBLE_CORES");
    toy_.library = SLUICE_FAKE_LIBNRT;
  }

  std::string Dir() const {
    return absl::StrCat(::testing::TempDir(), "/nrt_backend_test_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/", toy_.name);
  }

  absl::StatusOr<ModelConfig> Config() { return LoadModelConfig(toy_.Write(Dir())); }

  absl::StatusOr<std::unique_ptr<Backend>> Create(const ModelConfig& config, int replica, int warmup_runs = 1) {
    InstanceOptions options;
    options.model = &config;
    options.group = config.instances[0];
    // As ModelRepository does: each replica gets its slice of the group's cores.
    options.group.cores = ReplicaCores(*options.group.cores, options.group.count, replica);
    options.replica = replica;
    options.warmup_runs = warmup_runs;
    return Backend::Create(options);
  }

  // A (batch, length) batch: x[b, t, f] = 1 + b * 100 + t * 10 + f.
  static PaddedBatch Batch(int batch, int64_t length, std::vector<int64_t> row_lengths) {
    PaddedBatch p{batch, length, {HostTensor::Zeros(DataType::kFp32, {batch, length, 4})}, std::move(row_lengths)};
    auto x = p.inputs[0].values<float>();
    for (int b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < length; ++t) {
        for (int f = 0; f < 4; ++f) x[(b * length + t) * 4 + f] = 1.0f + b * 100 + t * 10 + f;
      }
    }
    return p;
  }

  FakeNrt fake_{SLUICE_FAKE_LIBNRT};
  NrtToyModel toy_;
};

TEST_F(NrtBackendTest, ConfigNamesTheRuntimeAndDefaultsTheLibraryToLibnrt) {
  absl::StatusOr<YamlNode> root = YamlNode::LoadString(
      "name: m\nkind: generic\ninputs: [{name: x, dtype: FP32, shape: [-1]}]\noutputs: [{name: y, dtype: FP32, shape: [2]}]\n"
      "buckets: {lengths: [4], batch_sizes: [1]}\n"
      "instances: [{device: neuron, runtime: nrt, cores: \"0\"}, {device: neuron, cores: \"1\"}]\n",
      "repo/m/config.yaml");
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<ModelConfig> config = ParseModelConfig(*root, "repo/m");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->instances[0].neuron_runtime, NeuronRuntimeKind::kNrt);
  EXPECT_EQ(config->instances[0].neuron_library, "libnrt.so.1");
  EXPECT_EQ(config->instances[1].neuron_runtime, NeuronRuntimeKind::kTorchScript);
  EXPECT_EQ(config->instances[1].neuron_library, "libtorchneuron.so");

  absl::StatusOr<YamlNode> bad = YamlNode::LoadString(
      "name: m\nkind: generic\ninputs: [{name: x, dtype: FP32, shape: [-1]}]\noutputs: [{name: y, dtype: FP32, shape: [2]}]\n"
      "buckets: {lengths: [4], batch_sizes: [1]}\ninstances: [{device: neuron, runtime: xla, cores: \"0\"}]\n",
      "repo/m/config.yaml");
  ASSERT_TRUE(bad.ok());
  EXPECT_THAT(ParseModelConfig(*bad, "repo/m").status().message(), HasSubstr("unknown runtime 'xla'"));
}

TEST_F(NrtBackendTest, ExecutesThroughTheNeffWithTheWeightBoundAndPaddingMasked) {
  absl::StatusOr<ModelConfig> config = Config();
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<Backend>> backend = Create(*config, 0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->load_stats().size(), 4u);

  absl::StatusOr<BatchResult> result = (*backend)->Execute(Batch(2, 8, {8, 3}));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 1u);
  const HostTensor& y = result->outputs[0];
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 8, 4}));
  auto ys = y.values<float>();
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 8; ++t) {
      for (int f = 0; f < 4; ++f) {
        const float x = 1.0f + b * 100 + t * 10 + f;
        const float want = t < (b == 0 ? 8 : 3) ? x * toy_.scale[f] : 0.0f;
        EXPECT_FLOAT_EQ(ys[(b * 8 + t) * 4 + f], want) << b << " " << t << " " << f;
      }
    }
  }
  EXPECT_EQ(result->output_lengths, (std::vector<int64_t>{8, 3}));
}

TEST_F(NrtBackendTest, OneDeviceWeightAndCacheWhateverTheBucketCount) {
  for (auto [lengths, sizes] : {std::pair{std::vector<int64_t>{4}, std::vector<int>{1}},
                                std::pair{std::vector<int64_t>{4, 8, 16}, std::vector<int>{1, 2, 4}}}) {
    fake_.reset();
    toy_.lengths = lengths;
    toy_.batch_sizes = sizes;
    absl::StatusOr<ModelConfig> config = Config();
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<Backend>> backend = Create(*config, 0);
    ASSERT_TRUE(backend.ok()) << backend.status();
    const int buckets = static_cast<int>(lengths.size() * sizes.size());
    EXPECT_EQ(fake_.counter("loads"), buckets);
    EXPECT_EQ(fake_.allocations_named("weight:scale"), 1) << buckets << " buckets";
    EXPECT_EQ(fake_.allocations_named("cache:state"), 1) << buckets << " buckets";
    // Per bucket: x, len, y, y_len, each allocated once; all of it on the device.
    EXPECT_EQ(fake_.counter("device_allocations"), 2 + 4 * buckets);
    EXPECT_EQ(fake_.counter("host_allocations"), 0);
  }
}

TEST_F(NrtBackendTest, EachReplicaLoadsOntoItsOwnCoreRelativeToTheVisibleCores) {
  absl::StatusOr<ModelConfig> config = Config();  // cores "2-3", count 2
  ASSERT_TRUE(config.ok()) << config.status();
  for (const char* visible : {"", "2-3"}) {
    fake_.reset();
    if (*visible) setenv("NEURON_RT_VISIBLE_CORES", visible, 1);
    {
      absl::StatusOr<std::unique_ptr<Backend>> first = Create(*config, 0);
      absl::StatusOr<std::unique_ptr<Backend>> second = Create(*config, 1);
      ASSERT_TRUE(first.ok()) << first.status();
      ASSERT_TRUE(second.ok()) << second.status();
      // Unset: every core visible, numbered from 0; "2-3" visible: machine core 2 is the runtime's core 0.
      const int base = *visible ? 0 : 2;
      ASSERT_EQ(fake_.counter("loads"), 8);
      for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(fake_.load_arg(i, 0), base + i / 4) << "load " << i << " visible '" << visible << "'";
        EXPECT_EQ(fake_.load_arg(i, 1), -1) << "vnc_count is deprecated: -1";
      }
      // The fake refuses executions whose tensors live on another core than the NEFF: both replicas run.
      EXPECT_TRUE((*first)->Execute(Batch(1, 4, {2})).ok());
      EXPECT_TRUE((*second)->Execute(Batch(1, 4, {2})).ok());
      EXPECT_EQ(fake_.counter("init"), 1) << "one nrt_init per process, shared by the replicas";
    }
    unsetenv("NEURON_RT_VISIBLE_CORES");
  }
}

TEST_F(NrtBackendTest, ReplicasWithMoreThanOneCoreAreRefusedWithTheFix) {
  toy_.count = 1;
  absl::StatusOr<ModelConfig> config = Config();
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<Backend>> backend = Create(*config, 0);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(), HasSubstr("set the group's count to its number of cores (2)"));
}

TEST_F(NrtBackendTest, ShutdownFreesEveryTensorUnloadsEveryNeffAndClosesTheRuntime) {
  absl::StatusOr<ModelConfig> config = Config();
  ASSERT_TRUE(config.ok()) << config.status();
  {
    absl::StatusOr<std::unique_ptr<Backend>> first = Create(*config, 0);
    ASSERT_TRUE(first.ok()) << first.status();
    {
      absl::StatusOr<std::unique_ptr<Backend>> second = Create(*config, 1);
      ASSERT_TRUE(second.ok()) << second.status();
    }
    EXPECT_EQ(fake_.counter("close"), 0) << "another instance still uses the runtime";
    EXPECT_EQ(fake_.counter("live_models"), 4);
  }
  EXPECT_EQ(fake_.counter("close"), 1);
  EXPECT_EQ(fake_.counter("live_models"), 0);
  EXPECT_EQ(fake_.counter("live_tensors"), 0);
  EXPECT_EQ(fake_.counter("live_sets"), 0);
}

// Each libnrt call that fails is reported with its name and NRT_STATUS, and leaves nothing behind.
TEST_F(NrtBackendTest, EveryFailingCallIsNamedWithItsStatus) {
  absl::StatusOr<ModelConfig> config = Config();
  ASSERT_TRUE(config.ok()) << config.status();
  struct Case {
    const char* function;
    int status;
    const char* status_name;
    bool at_execute;  // fails in Execute() (warm-up off) rather than in Create()
  };
  for (const Case& c : {Case{"nrt_init", NRT_FAILURE, "NRT_FAILURE (1)", false},
                        Case{"nrt_load", NRT_LOAD_NOT_ENOUGH_NC, "NRT_LOAD_NOT_ENOUGH_NC (9)", false},
                        Case{"nrt_get_model_tensor_info", NRT_INVALID, "NRT_INVALID (2)", false},
                        Case{"nrt_free_model_tensor_info", NRT_FAILURE, "NRT_FAILURE (1)", false},
                        Case{"nrt_allocate_tensor_set", NRT_RESOURCE, "NRT_RESOURCE (4)", false},
                        Case{"nrt_tensor_allocate", NRT_RESOURCE, "NRT_RESOURCE (4)", false},
                        Case{"nrt_add_tensor_to_tensor_set", NRT_INVALID, "NRT_INVALID (2)", false},
                        Case{"nrt_tensor_write", NRT_HW_ERROR, "NRT_HW_ERROR (6)", false},
                        Case{"nrt_tensor_write", NRT_HW_ERROR, "NRT_HW_ERROR (6)", true},
                        Case{"nrt_execute", NRT_EXEC_COMPLETED_WITH_ERR, "NRT_EXEC_COMPLETED_WITH_ERR (1004)", true},
                        Case{"nrt_execute", NRT_TIMEOUT, "NRT_TIMEOUT (5)", false},
                        Case{"nrt_tensor_read", NRT_FAILURE, "NRT_FAILURE (1)", true}}) {
    SCOPED_TRACE(absl::StrCat(c.function, c.at_execute ? " at execute" : " at create"));
    fake_.reset();
    absl::Status status;
    if (c.at_execute) {
      absl::StatusOr<std::unique_ptr<Backend>> backend = Create(*config, 0, /*warmup_runs=*/0);
      {
        ASSERT_TRUE(backend.ok()) << backend.status();
        fake_.fail_next(c.function, c.status);
        status = (*backend)->Execute(Batch(1, 4, {4})).status();
        // The instance keeps working once the device does.
        EXPECT_TRUE((*backend)->Execute(Batch(1, 4, {4})).ok());
      }
    } else {
      fake_.fail_next(c.function, c.status);
      status = Create(*config, 0).status();
    }
    EXPECT_FALSE(status.ok());
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat(c.function, " failed with ", c.status_name)));
    if (c.function == std::string("nrt_execute") && !c.at_execute) {
      // A failed warm-up run keeps its status's code and says it was the warm-up (NeffInstance::Load).
      EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
      EXPECT_THAT(std::string(status.message()), StartsWith("warming up: "));
    }
    EXPECT_EQ(fake_.counter("live_models"), 0);
    EXPECT_EQ(fake_.counter("live_tensors"), 0);
    EXPECT_EQ(fake_.counter("live_sets"), 0);
    EXPECT_EQ(fake_.counter("close"), c.function == std::string("nrt_init") ? 0 : 1);
  }
}

TEST_F(NrtBackendTest, AFailedUnloadAtShutdownIsReportedWithItsStatusAndTheRestIsReleased) {
  absl::StatusOr<ModelConfig> config = Config();
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<Backend>> backend = Create(*config, 0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  fake_.fail_next("nrt_unload", NRT_FAILURE);  // the first bucket's
  ::testing::internal::CaptureStderr();
  backend->reset();
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(logged, HasSubstr("nrt_unload failed with NRT_FAILURE (1) (model nrt_toy bucket (1, 4) NEFF "));
  EXPECT_THAT(logged, HasSubstr("b1_l4.neff"));
  EXPECT_EQ(fake_.counter("unloads"), 3);
  EXPECT_EQ(fake_.counter("live_tensors"), 0);
  EXPECT_EQ(fake_.counter("live_sets"), 0);
  EXPECT_EQ(fake_.counter("close"), 1);
}

TEST_F(NrtBackendTest, AMissingLibraryOrSymbolIsNamed) {
  toy_.library = "/nonexistent/libnrt.so.1";
  absl::StatusOr<ModelConfig> config = Config();
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<Backend>> backend = Create(*config, 0);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(), HasSubstr("cannot load the Neuron Runtime library /nonexistent/libnrt.so.1"));

  toy_.library = SLUICE_NOT_LIBNRT;  // a real shared library without nrt_* symbols
  config = Config();
  ASSERT_TRUE(config.ok()) << config.status();
  backend = Create(*config, 0);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(), HasSubstr("has no symbol nrt_init"));
}

TEST_F(NrtBackendTest, NeffTensorsDisagreeingWithTheManifestAreNamed) {
  struct Case {
    std::function<std::string(int, int64_t, std::string)> edit;
    const char* want;
  };
  auto replace = [](std::string from, std::string to) {
    return [from, to](int b, int64_t l, std::string s) {
      if (b == 2 && l == 8) s.replace(s.find(from), from.size(), to);
      return s;
    };
  };
  for (const Case& c : {
           Case{replace("tensor in state", "tensor in extra FLOAT32 2\ntensor in state"),
                "b2_l8.neff tensor 'extra': the NEFF has this tensor but the manifest does not bind it"},
           Case{replace("tensor in state FLOAT32 16\n", ""),
                "b2_l8.neff tensor 'state': the manifest binds it but the NEFF has no such tensor"},
           Case{replace("tensor in x FLOAT32 2 8 4", "tensor in x FLOAT32 2 8 5"),
                "b2_l8.neff tensor 'x': the NEFF has FLOAT32, 320 bytes; input 'x' [2, 8, 4] needs FLOAT32, 256"},
           Case{replace("tensor in w FLOAT32 4", "tensor in w FLOAT32 3"), "tensor 'w': the NEFF has FLOAT32, 12"},
           Case{replace("tensor in state FLOAT32 16", "tensor in state FLOAT32 8"),
                "another bucket binds cache:state as FLOAT32, 64 bytes"},
           Case{replace("tensor out y FLOAT32", "tensor in y FLOAT32"), "role output needs a NEFF output"},
       }) {
    SCOPED_TRACE(c.want);
    fake_.reset();
    toy_.edit_neff = c.edit;
    absl::StatusOr<ModelConfig> config = Config();
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<Backend>> backend = Create(*config, 0);
    ASSERT_FALSE(backend.ok());
    EXPECT_THAT(backend.status().message(), HasSubstr(c.want));
    EXPECT_EQ(fake_.counter("live_tensors"), 0);
    EXPECT_EQ(fake_.counter("live_models"), 0);
  }
}

TEST_F(NrtBackendTest, ManifestErrorsNameTheFileTheNeffAndTheTensor) {
  auto replace_first = [](std::string from, std::string to) {
    return [from, to](std::string s) { return s.replace(s.find(from), from.size(), to); };
  };
  struct Case {
    std::function<std::string(std::string)> edit;
    const char* want;
  };
  for (const Case& c : {
           Case{replace_first("version: 1", "version: 2"), "version 2 is not supported"},
           Case{replace_first("role: input, name: x", "role: input, name: z"),
                "b1_l4.neff tensor 'x': config.yaml declares no input 'z'"},
           Case{replace_first("role: lengths}", "role: lengths, name: n}"), "role lengths takes no name"},
           Case{replace_first("role: weight, name: scale", "role: bias, name: scale"), "unknown role 'bias'"},
           Case{replace_first("      - {tensor: y_len, role: output_lengths}\n", ""),
                "exactly one output_lengths tensor is needed"},
           Case{replace_first("      - {tensor: y, role: output, name: y}\n", ""),
                "b1_l4.neff: output 'y' is bound 0 times"},
           Case{replace_first("weights: weights.safetensors\n", ""), "names no weights file"},
           Case{replace_first("batch_size: 1\n    length: 4", "batch_size: 1\n    length: 5"),
                "bucket (1, 5) is not a bucket of config.yaml"},
       }) {
    SCOPED_TRACE(c.want);
    toy_.edit_manifest = c.edit;
    absl::StatusOr<ModelConfig> config = Config();
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<Backend>> backend = Create(*config, 0);
    ASSERT_FALSE(backend.ok());
    EXPECT_THAT(backend.status().message(), HasSubstr(c.want));
    EXPECT_THAT(backend.status().message(), HasSubstr("neff_manifest.yaml:"));
  }
  // A bucket without its NEFF entry.
  toy_.edit_manifest = [](std::string s) { return s.substr(0, s.rfind("  - batch_size:")); };
  absl::StatusOr<ModelConfig> config = Config();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(Create(*config, 0).status().message(), HasSubstr("no NEFF for bucket (2, 8)"));
}

TEST_F(NrtBackendTest, SafetensorsHeadersAreCheckedAndErrorsNameTheTensor) {
  const std::string dir = toy_.Write(Dir());
  absl::StatusOr<SafetensorsFile> good = SafetensorsFile::Open(dir + "/weights.safetensors");
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->tensors().size(), 1u) << "__metadata__ is not a tensor";
  absl::StatusOr<std::vector<std::byte>> scale = good->ReadTensor("scale");
  ASSERT_TRUE(scale.ok()) << scale.status();
  ASSERT_EQ(scale->size(), 16u);
  float second;
  std::memcpy(&second, scale->data() + 4, 4);
  EXPECT_EQ(second, 2.0f);
  EXPECT_THAT(good->ReadTensor("bias").status().message(), HasSubstr("has no tensor 'bias'"));

  auto write = [&](const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    bytes += header + std::string(data_bytes, '\0');
    const std::string path = dir + "/bad.safetensors";
    std::ofstream(path, std::ios::binary) << bytes;
    return SafetensorsFile::Open(path).status();
  };
  EXPECT_THAT(write(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8).message(),
              HasSubstr("tensor 'w': data ends at byte"));
  EXPECT_THAT(write(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})", 16).message(),
              HasSubstr("tensor 'w': 16 bytes, but 3 F32 elements need 12"));
  EXPECT_THAT(write(R"({"w": {"dtype": "F32", "shape": [4]}})", 16).message(), HasSubstr("needs dtype"));
  EXPECT_THAT(write("not json", 0).message(), HasSubstr("header is not a JSON object"));
}

}  // namespace
}  // namespace sluice
