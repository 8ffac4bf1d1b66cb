// A stand-in for AWS's libtorchneuron.so, loaded as an instance group's neuron_library by neuron_placement_test:
// it registers the TorchScript classes sluice's core placement talks to, under libtorchneuron's names, and records
// what happens to them. It runs no Neuron code; what the real library does is only documented, not observed here.
//
// - torch.classes.neuron.Runtime: the process-wide default placement that torch_neuronx.neuron_cores_context
//   sets around torch.jit.load (get_default_start_nc, get_default_nc_count, set_default_neuron_cores), and
//   get_visible_nc_count (the cores listed in NEURON_RT_VISIBLE_CORES; 8 when unset).
// - torch.classes.neuron.Model: what a torch_neuronx.trace()d graph holds for each Neuron subgraph. Unpickling one
//   (at torch::jit::load) takes the runtime's current default placement, as the documented context manager
//   implies, and records "load <tag> start_nc S nc_count C"; run() returns its input doubled.
// - torch.classes.sluice_fake_old.Runtime: a Runtime without the placement methods (an older library).
// C entry points (dlsym): the log, a reset, and a writer of small TorchScript graphs holding a neuron.Model.
//
// Thread-safety: the runtime state and the log are guarded by one mutex; the writer is safe to call concurrently.
#include <torch/custom_class.h>
#include <torch/script.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::mutex mu;
int64_t default_start_nc = -1;  // guarded by mu
int64_t default_nc_count = -1;  // guarded by mu
std::vector<std::string>* log_lines = new std::vector<std::string>();  // guarded by mu; never freed
std::string* log_text = new std::string();                             // guarded by mu; never freed

void Record(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu);
  log_lines->push_back(line);
}

int64_t VisibleCoreCount() {
  const char* visible = std::getenv("NEURON_RT_VISIBLE_CORES");
  if (visible == nullptr || *visible == '\0') return 8;
  int64_t count = 0;
  std::stringstream parts(visible);
  for (std::string part; std::getline(parts, part, ',');) {
    const size_t dash = part.find('-');
    count += dash == std::string::npos ? 1 : std::stoll(part.substr(dash + 1)) - std::stoll(part.substr(0, dash)) + 1;
  }
  return count;
}

struct FakeRuntime : torch::CustomClassHolder {
  int64_t get_default_start_nc() {
    std::lock_guard<std::mutex> lock(mu);
    return default_start_nc;
  }
  int64_t get_default_nc_count() {
    std::lock_guard<std::mutex> lock(mu);
    return default_nc_count;
  }
  int64_t get_visible_nc_count() { return VisibleCoreCount(); }
  void set_default_neuron_cores(int64_t start_nc, int64_t nc_count) {
    std::lock_guard<std::mutex> lock(mu);
    default_start_nc = start_nc;
    default_nc_count = nc_count;
    log_lines->push_back("set_default_neuron_cores " + std::to_string(start_nc) + " " + std::to_string(nc_count));
  }
};

struct FakeOldRuntime : torch::CustomClassHolder {
  int64_t get_visible_nc_count() { return VisibleCoreCount(); }
};

struct FakeModel : torch::CustomClassHolder {
  explicit FakeModel(std::string tag) : tag(std::move(tag)) {}
  std::string tag;
  int64_t start_nc = -1;
  int64_t nc_count = -1;

  void set_neuron_devices(int64_t start, int64_t count) {
    start_nc = start;
    nc_count = count;
    Record("set_neuron_devices " + tag + " " + std::to_string(start) + " " + std::to_string(count));
  }
  at::Tensor run(at::Tensor x) { return x * 2; }
};

TORCH_LIBRARY(neuron, m) {
  m.class_<FakeRuntime>("Runtime")
      .def(torch::init<>())
      .def("get_default_start_nc", &FakeRuntime::get_default_start_nc)
      .def("get_default_nc_count", &FakeRuntime::get_default_nc_count)
      .def("get_visible_nc_count", &FakeRuntime::get_visible_nc_count)
      .def("set_default_neuron_cores", &FakeRuntime::set_default_neuron_cores);
  m.class_<FakeModel>("Model")
      .def(torch::init<std::string>())
      .def("set_neuron_devices", &FakeModel::set_neuron_devices)
      .def("run", &FakeModel::run)
      .def_pickle([](const c10::intrusive_ptr<FakeModel>& self) -> std::string { return self->tag; },
                  [](std::string tag) -> c10::intrusive_ptr<FakeModel> {
                    auto model = c10::make_intrusive<FakeModel>(std::move(tag));
                    std::lock_guard<std::mutex> lock(mu);
                    model->start_nc = default_start_nc;  // placed where the runtime's default says, at load
                    model->nc_count = default_nc_count;
                    log_lines->push_back("load " + model->tag + " start_nc " + std::to_string(model->start_nc) +
                                         " nc_count " + std::to_string(model->nc_count));
                    return model;
                  });
}

TORCH_LIBRARY(sluice_fake_old, m) {
  m.class_<FakeOldRuntime>("Runtime").def(torch::init<>()).def("get_visible_nc_count",
                                                               &FakeOldRuntime::get_visible_nc_count);
}

// TorchScript bodies of the graphs, by kind; VOCAB is replaced by the vocabulary size.
const char* GraphSource(const std::string& kind) {
  if (kind == "bucket") {  // sluice's stateless contract: (inputs..., lengths) -> (outputs..., output lengths)
    return "def forward(self, x: Tensor, lengths: Tensor):\n"
           "    return (self.model.run(x), lengths)\n";
  }
  if (kind == "prefill") {  // (ids [1, L], length, slot, k_cache, v_cache) -> logits [1, vocab]
    return "def forward(self, ids: Tensor, length: Tensor, slot: Tensor, k: Tensor, v: Tensor):\n"
           "    return self.model.run(torch.zeros([1, VOCAB]))\n";
  }
  if (kind == "decode") {  // (tokens [B], positions, slots, k_cache, v_cache) -> logits [B, vocab]
    return "def forward(self, tokens: Tensor, positions: Tensor, slots: Tensor, k: Tensor, v: Tensor):\n"
           "    return self.model.run(torch.zeros([tokens.size(0), VOCAB]))\n";
  }
  return nullptr;
}

}  // namespace

extern "C" {

// The log since the last reset, one event a line. The pointer stays valid until the next call.
const char* sluice_fake_neuron_log() {
  std::lock_guard<std::mutex> lock(mu);
  log_text->clear();
  for (const std::string& line : *log_lines) *log_text += line + "\n";
  return log_text->c_str();
}

void sluice_fake_neuron_reset() {
  std::lock_guard<std::mutex> lock(mu);
  log_lines->clear();
  default_start_nc = -1;
  default_nc_count = -1;
}

// Writes a TorchScript module of `kind` (bucket, prefill or decode) holding one neuron.Model tagged `tag`.
// Returns 0, or -1 with the reason in `error` (up to error_size bytes).
int sluice_fake_neuron_write_graph(const char* path, const char* kind, const char* tag, int vocab, char* error,
                                   size_t error_size) {
  try {
    const char* source = GraphSource(kind);
    if (source == nullptr) throw std::runtime_error(std::string("unknown graph kind ") + kind);
    std::string code = source;
    const size_t at = code.find("VOCAB");
    if (at != std::string::npos) code.replace(at, 5, std::to_string(vocab));
    torch::jit::Module module("__torch__.FakeNeuronGraph");
    module.register_attribute("model", c10::getCustomClassType<c10::intrusive_ptr<FakeModel>>(),
                              c10::IValue(c10::make_intrusive<FakeModel>(tag)));
    module.define(code);
    module.save(path);
    return 0;
  } catch (const std::exception& e) {
    std::strncpy(error, e.what(), error_size - 1);
    error[error_size - 1] = '\0';
    return -1;
  }
}

}  // extern "C"
