// A toy model for device neuron, runtime nrt, written to disk for tests: config.yaml, neff_manifest.yaml, a
// weights.safetensors and one fake NEFF per bucket (the text format tests/backend/fake_libnrt.cc executes):
// y[b, t, :] = x[b, t, :] * scale (the weight, {1, 2, 3, 4}) for t < lengths[b], else 0; y_lengths = lengths.
// Each NEFF also binds a cache ("state") that every bucket shares.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::testing {

struct NrtToyModel {
  std::string name = "nrt_toy";
  std::vector<int64_t> lengths = {4, 8};
  std::vector<int> batch_sizes = {1, 2};
  int count = 2;
  std::string cores = "2-3";
  std::string library;  // neuron_library
  std::vector<float> scale = {1, 2, 3, 4};
  // Hooks that let a test break one thing: the NEFF text of bucket (b, l), the manifest text.
  std::function<std::string(int, int64_t, std::string)> edit_neff = [](int, int64_t, std::string s) { return s; };
  std::function<std::string(std::string)> edit_manifest = [](std::string s) { return s; };

  static std::string Neff(int b, int64_t l) {
    return absl::StrCat("fake-neff 1\n", "tensor in x FLOAT32 ", b, " ", l, " 4\n", "tensor in len INT64 ", b, "\n",
                        "tensor in w FLOAT32 4\n", "tensor in state FLOAT32 16\n", "tensor out y FLOAT32 ", b, " ",
                        l, " 4\n", "tensor out y_len INT64 ", b, "\n", "compute mul_mask x w len y\n",
                        "compute copy_lengths len y_len\n");
  }

  std::string Config() const {
    return absl::StrCat("name: ", name, "\nkind: generic\n", "inputs:\n  - {name: x, dtype: FP32, shape: [-1, 4]}\n",
                        "outputs:\n  - {name: y, dtype: FP32, shape: [-1, 4]}\n", "buckets: {lengths: [",
                        absl::StrJoin(lengths, ", "), "], batch_sizes: [", absl::StrJoin(batch_sizes, ", "), "]}\n",
                        "instances: [{count: ", count, ", device: neuron, runtime: nrt, cores: \"", cores,
                        "\", neuron_library: \"", library, "\"}]\n");
  }

  std::string Manifest() const {
    std::string text = "version: 1\nweights: weights.safetensors\nbuckets:\n";
    for (int b : batch_sizes) {
      for (int64_t l : lengths) {
        absl::StrAppend(&text, "  - batch_size: ", b, "\n    length: ", l, "\n    neff: neffs/b", b, "_l", l,
                        ".neff\n    tensors:\n", "      - {tensor: x, role: input, name: x}\n",
                        "      - {tensor: len, role: lengths}\n", "      - {tensor: w, role: weight, name: scale}\n",
                        "      - {tensor: state, role: cache, name: state}\n",
                        "      - {tensor: y, role: output, name: y}\n", "      - {tensor: y_len, role: output_lengths}\n");
      }
    }
    return text;
  }

  // A safetensors file: 8-byte little-endian header length, JSON header, raw bytes.
  std::string Safetensors() const {
    const std::string header = absl::StrCat("{\"__metadata__\": {\"format\": \"pt\"}, \"scale\": {\"dtype\": \"F32\", ",
                                            "\"shape\": [", scale.size(), "], \"data_offsets\": [0, ",
                                            scale.size() * 4, "]}}");
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    out += header;
    out.append(reinterpret_cast<const char*>(scale.data()), scale.size() * 4);
    return out;
  }

  // Writes the model under `dir` (replacing what was there) and returns dir.
  std::string Write(const std::string& dir) const {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir + "/neffs");
    auto put = [](const std::string& path, const std::string& text) {
      std::ofstream(path, std::ios::binary) << text;
    };
    put(dir + "/config.yaml", Config());
    put(dir + "/neff_manifest.yaml", edit_manifest(Manifest()));
    put(dir + "/weights.safetensors", Safetensors());
    for (int b : batch_sizes) {
      for (int64_t l : lengths) put(absl::StrCat(dir, "/neffs/b", b, "_l", l, ".neff"), edit_neff(b, l, Neff(b, l)));
    }
    return dir;
  }
};

}  // namespace sluice::testing
