#include "tests/backend/fake_nrt_torchscript.h"

#include <torch/script.h>

#include <cstring>
#include <exception>

namespace sluice::testing {
namespace {

bool TorchDtype(nrt_dtype_t dtype, torch::ScalarType* out) {
  switch (dtype) {
    case NRT_DTYPE_FLOAT32: *out = torch::kFloat32; return true;
    case NRT_DTYPE_FLOAT16: *out = torch::kFloat16; return true;
    case NRT_DTYPE_INT64: *out = torch::kInt64; return true;
    case NRT_DTYPE_INT32: *out = torch::kInt32; return true;
    case NRT_DTYPE_UINT8: *out = torch::kUInt8; return true;
    default: return false;
  }
}

class TorchScriptNeff final : public FakeTorchGraph {
 public:
  explicit TorchScriptNeff(torch::jit::Module module) : module_(std::move(module)) {}

  bool Run(const std::vector<FakeNeffBuffer>& args, const std::vector<FakeNeffBuffer>& outputs,
           std::string* error) override {
    try {
      torch::InferenceMode inference_mode;
      std::vector<torch::jit::IValue> inputs;
      for (const FakeNeffBuffer& arg : args) {
        torch::ScalarType dtype;
        if (!TorchDtype(arg.dtype, &dtype)) return Fail(error, "an argument has a dtype the fake cannot run");
        std::vector<int64_t> shape(arg.shape.begin(), arg.shape.end());
        // Borrowed, not copied: a graph that updates an argument in place (a generation graph's KV cache) writes
        // straight into the tensor bound to the NEFF, as a NEFF with an input/output alias would on the device.
        inputs.emplace_back(torch::from_blob(arg.data, shape, torch::TensorOptions().dtype(dtype)));
      }
      torch::jit::IValue returned = module_.forward(inputs);
      std::vector<torch::jit::IValue> elements;
      if (returned.isTuple()) {
        for (const auto& e : returned.toTupleRef().elements()) elements.push_back(e);
      } else if (returned.isTensor()) {  // a graph with one result (a generation graph's logits)
        elements.push_back(returned);
      } else {
        return Fail(error, "the graph returned neither a tensor nor a tuple");
      }
      if (elements.size() != outputs.size()) {
        return Fail(error, "the graph returned " + std::to_string(elements.size()) + " tensors, the NEFF declares " +
                               std::to_string(outputs.size()) + " outputs");
      }
      for (size_t i = 0; i < outputs.size(); ++i) {
        torch::ScalarType dtype;
        if (!TorchDtype(outputs[i].dtype, &dtype)) return Fail(error, "an output has a dtype the fake cannot run");
        torch::Tensor out = elements[i].toTensor().to(torch::kCPU).contiguous();
        const size_t bytes = static_cast<size_t>(out.numel()) * out.element_size();
        if (out.scalar_type() != dtype || bytes != outputs[i].size) {
          return Fail(error, "output " + std::to_string(i) + " is " + std::string(c10::toString(out.scalar_type())) +
                                 ", " + std::to_string(bytes) + " bytes; the NEFF declares " +
                                 std::to_string(outputs[i].size) + " bytes");
        }
        std::memcpy(outputs[i].data, out.data_ptr(), bytes);
      }
      return true;
    } catch (const std::exception& e) {
      return Fail(error, e.what());
    }
  }

 private:
  static bool Fail(std::string* error, const std::string& why) {
    *error = why;
    return false;
  }

  torch::jit::Module module_;
};

}  // namespace

std::unique_ptr<FakeTorchGraph> FakeTorchGraph::Load(const std::string& path, std::string* error) {
  try {
    torch::jit::Module module = torch::jit::load(path);
    module.eval();
    return std::make_unique<TorchScriptNeff>(std::move(module));
  } catch (const std::exception& e) {
    *error = path + ": " + e.what();
    return nullptr;
  }
}

}  // namespace sluice::testing
