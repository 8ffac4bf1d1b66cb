// Test helper: writes sim-device models (no graphs) into a repository for tests against the real sluice-server.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace sluice::testing {

// One generic sim model: one input, one FP32 output `y`, one bucket length, one instance whose every batch takes
// `base_ms`.
struct SimModel {
  std::string name;
  std::string input = "{name: x, dtype: FP32, shape: [-1]}";
  int64_t length = 16;
  std::string batch_sizes = "1";  // as written inside the YAML list, e.g. "1, 4"
  int max_queue_size = 64;
  int base_ms = 0;
};

// The model's config.yaml.
inline std::string SimModelConfig(const SimModel& model) {
  std::ostringstream config;
  config << "name: " << model.name << "\nkind: generic\n"
         << "inputs:\n  - " << model.input << "\n"
         << "outputs:\n  - {name: y, dtype: FP32, shape: [-1]}\n"
         << "buckets: {lengths: [" << model.length << "], batch_sizes: [" << model.batch_sizes << "]}\n"
         << "batching: {max_queue_delay_ms: 0, max_queue_size: " << model.max_queue_size << "}\n"
         << "instances: [{count: 1, device: sim}]\n"
         << "sim: {base_ms: " << model.base_ms << ", per_sample_us: 0}\n";
  return config.str();
}

// A model directory's config.yaml, as text (for configs SimModel cannot express: speech sections, faults, ...).
struct ModelConfigText {
  std::string name;
  std::string config_yaml;
};

// Writes <repository>/<name>/config.yaml.
inline void WriteModelConfig(const std::filesystem::path& repository, const ModelConfigText& model) {
  std::filesystem::create_directories(repository / model.name);
  std::ofstream(repository / model.name / "config.yaml") << model.config_yaml;
}

inline void WriteSimModel(const std::filesystem::path& repository, const SimModel& model) {
  WriteModelConfig(repository, {model.name, SimModelConfig(model)});
}

// A repository of sim models at <tmp>/<prefix>_<pid>/, written (afresh) on first use and removed when the
// process's tests end. Create it with AddSimRepository or AddConfigRepository, at namespace scope.
class SimRepository : public ::testing::Environment {
 public:
  SimRepository(const std::string& prefix, std::vector<ModelConfigText> models)
      : path_(std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()))),
        models_(std::move(models)) {}

  const std::string& path() {
    std::call_once(written_, [this] {
      std::filesystem::remove_all(path_);
      for (const ModelConfigText& model : models_) WriteModelConfig(path_, model);
      path_text_ = path_.string();
    });
    return path_text_;
  }

  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

 private:
  const std::filesystem::path path_;
  const std::vector<ModelConfigText> models_;
  std::once_flag written_;
  std::string path_text_;
};

// Registers a SimRepository with gtest (which owns it and removes the directory after the last test).
inline SimRepository& AddConfigRepository(const std::string& prefix, std::vector<ModelConfigText> models) {
  auto* repository = new SimRepository(prefix, std::move(models));
  ::testing::AddGlobalTestEnvironment(repository);
  return *repository;
}

inline SimRepository& AddSimRepository(const std::string& prefix, const std::vector<SimModel>& models) {
  std::vector<ModelConfigText> texts;
  for (const SimModel& model : models) texts.push_back({model.name, SimModelConfig(model)});
  return AddConfigRepository(prefix, std::move(texts));
}

}  // namespace sluice::testing
