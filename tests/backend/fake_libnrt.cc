// A stand-in for the Neuron Runtime's libnrt.so.1, built by the tests and loaded as an instance's
// neuron_library: the entry points sluice calls, over host memory. Its "NEFF" is a text file the tests write:
//
//   fake-neff 1
//   tensor in|out <name> FLOAT32|INT64|INT32|UINT8 <dim> <dim> ...
//   compute mul_mask <x> <w> <lengths> <y>     y[b, t, f...] = t < lengths[b] ? x[b, t, f...] * w[f...] : 0
//   compute copy_lengths <lengths> <out>        out[b] = lengths[b]
//   compute torchscript <graph.pt> <arg>... -> <out>...
//                                               outs = graph.forward(args...): a real model's bucket graph run by
//                                               libtorch on the host (fake_nrt_torchscript.h); a graph that
//                                               updates an argument in place (a KV cache) writes the bound bytes
//   alias <out> <in>                            the output is the input's buffer, updated in place (what a
//                                               compiled NEFF's input/output alias means): nrt_execute requires
//                                               the very same tensor bound to both, else NRT_EXEC_BAD_INPUT
//
// It checks what a device would: every NEFF tensor is in the sets given to nrt_execute, with the NEFF's byte
// size, allocated on the device of the model's NeuronCore. It counts allocations per placement and name prefix,
// records each nrt_load's (vnc, vnc_count), and can fail the next call of a named function with a given status
// (fake_nrt_* functions, read by the tests through dlsym). With FAKE_LIBNRT_LOG set it also appends
// "nrt_init", "nrt_load vnc=<n> vnc_count=<m>", "nrt_unload vnc=<n>" and, at nrt_close, one summary line
// ("nrt_close loads=.. unloads=.. weight_allocations=.. cache_allocations=.. device_allocations=.. live_models=..
// live_tensors=.. live_sets=.."), for tests of another process (the server), which read it after it exits.
// FAKE_LIBNRT_LOAD_DELAY_MS makes every nrt_load take that long (a slow load, for tests that stop a server
// while it loads).
// Every entry point takes one global mutex; a TorchScript compute runs outside it (like separate NeuronCores).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/nrt/nrt_api.h"
#include "tests/backend/fake_nrt_torchscript.h"

struct nrt_tensor {
  std::vector<unsigned char> bytes;
  nrt_tensor_placement_t placement;
  int vnc;
  std::string name;
};

struct FakeTensorDecl {
  bool output = false;
  std::string name;
  nrt_dtype_t dtype = NRT_DTYPE_FLOAT32;
  std::vector<uint32_t> shape;
  size_t size = 0;
};

struct nrt_model {
  int vnc = 0;
  std::vector<FakeTensorDecl> tensors;
  std::vector<std::vector<std::string>> computes;
  // "compute torchscript": the graph and the NEFF tensors passed to it and filled from its results, in order.
  std::unique_ptr<sluice::testing::FakeTorchGraph> graph;
  std::vector<std::string> graph_args, graph_outputs;
  std::vector<std::pair<std::string, std::string>> aliases;  // (output, input): one buffer
};

namespace {

using TensorSet = std::map<std::string, nrt_tensor_t*>;

struct State {
  std::mutex mu;
  int init_calls = 0, close_calls = 0, executes = 0, unloads = 0, live_models = 0, live_tensors = 0, live_sets = 0;
  bool initialized = false;
  std::map<int, int> allocations;  // placement -> count
  std::vector<std::string> allocation_names;
  std::vector<std::pair<int, int>> loads;  // (vnc, vnc_count)
  std::map<std::string, int> fail_next;    // function -> status
};

State& S() {
  static State* state = new State();
  return *state;
}

// REQUIRES: S().mu held.
bool Fails(const char* function, NRT_STATUS* status) {
  auto it = S().fail_next.find(function);
  if (it == S().fail_next.end()) return false;
  *status = it->second;
  S().fail_next.erase(it);
  return true;
}

size_t DtypeSize(nrt_dtype_t dtype) {
  switch (dtype) {
    case NRT_DTYPE_INT64: return 8;
    case NRT_DTYPE_FLOAT32:
    case NRT_DTYPE_INT32: return 4;
    default: return 1;
  }
}

bool ParseDtype(const std::string& text, nrt_dtype_t* dtype) {
  if (text == "FLOAT32") *dtype = NRT_DTYPE_FLOAT32;
  else if (text == "INT64") *dtype = NRT_DTYPE_INT64;
  else if (text == "INT32") *dtype = NRT_DTYPE_INT32;
  else if (text == "UINT8") *dtype = NRT_DTYPE_UINT8;
  else return false;
  return true;
}

int64_t LengthAt(const nrt_tensor_t* t, nrt_dtype_t dtype, size_t row) {
  if (dtype == NRT_DTYPE_INT32) {
    int32_t v;
    std::memcpy(&v, t->bytes.data() + row * 4, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, t->bytes.data() + row * 8, 8);
  return v;
}

// REQUIRES: S().mu held (serializes the appends).
void Log(const std::string& line) {
  if (const char* path = std::getenv("FAKE_LIBNRT_LOG")) std::ofstream(path, std::ios::app) << line << "\n";
}

const FakeTensorDecl* Decl(const nrt_model_t* model, const std::string& name) {
  for (const FakeTensorDecl& d : model->tensors) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

// "compute torchscript <graph.pt> <arg>... -> <out>...": loads the graph and records its tensors; false when the
// line is malformed, the graph cannot be loaded, or a name is not a NEFF tensor of the right direction.
bool ParseTorchScript(nrt_model_t* model, const std::vector<std::string>& c) {
  if (c.size() < 3 || model->graph) return false;
  std::string error;
  model->graph = sluice::testing::FakeTorchGraph::Load(c[1], &error);
  if (!model->graph) {
    std::fprintf(stderr, "fake libnrt: %s\n", error.c_str());
    return false;
  }
  bool outputs = false;
  for (size_t i = 2; i < c.size(); ++i) {
    if (c[i] == "->") {
      outputs = true;
      continue;
    }
    const FakeTensorDecl* d = Decl(model, c[i]);
    if (d == nullptr || d->output != outputs) return false;
    (outputs ? model->graph_outputs : model->graph_args).push_back(c[i]);
  }
  return !model->graph_outputs.empty();
}

// The bytes of the named NEFF tensors as bound for one execution.
std::vector<sluice::testing::FakeNeffBuffer> Buffers(const nrt_model_t* model, const std::vector<std::string>& names,
                                                     std::map<std::string, nrt_tensor_t*>& bound) {
  std::vector<sluice::testing::FakeNeffBuffer> buffers;
  for (const std::string& name : names) {
    const FakeTensorDecl* d = Decl(model, name);
    nrt_tensor_t* t = bound[name];
    buffers.push_back({t->bytes.data(), t->bytes.size(), d->dtype, d->shape});
  }
  return buffers;
}

int CountNamed(const std::string& prefix) {
  int n = 0;
  for (const std::string& name : S().allocation_names) n += name.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

}  // namespace

extern "C" {

NRT_STATUS nrt_init(nrt_framework_type_t, const char*, const char*) {
  std::lock_guard<std::mutex> lock(S().mu);
  ++S().init_calls;
  Log("nrt_init");
  NRT_STATUS status;
  if (Fails("nrt_init", &status)) return status;
  S().initialized = true;
  return NRT_SUCCESS;
}

void nrt_close() {
  std::lock_guard<std::mutex> lock(S().mu);
  State& s = S();
  ++s.close_calls;
  Log("nrt_close loads=" + std::to_string(s.loads.size()) + " unloads=" + std::to_string(s.unloads) +
      " weight_allocations=" + std::to_string(CountNamed("weight:")) +
      " cache_allocations=" + std::to_string(CountNamed("cache:")) +
      " device_allocations=" + std::to_string(s.allocations[NRT_TENSOR_PLACEMENT_DEVICE]) +
      " live_models=" + std::to_string(s.live_models) + " live_tensors=" + std::to_string(s.live_tensors) +
      " live_sets=" + std::to_string(s.live_sets));
  S().initialized = false;
}

NRT_STATUS nrt_load(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count, nrt_model_t** model) {
  if (const char* delay = std::getenv("FAKE_LIBNRT_LOAD_DELAY_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
  }
  std::lock_guard<std::mutex> lock(S().mu);
  if (!S().initialized) return NRT_UNINITIALIZED;
  S().loads.emplace_back(vnc, vnc_count);
  Log("nrt_load vnc=" + std::to_string(vnc) + " vnc_count=" + std::to_string(vnc_count));
  NRT_STATUS status;
  if (Fails("nrt_load", &status)) return status;
  std::istringstream in(std::string(static_cast<const char*>(neff_bytes), size));
  std::string line;
  if (!std::getline(in, line) || line != "fake-neff 1") return NRT_INVALID;
  auto* m = new nrt_model();
  m->vnc = vnc;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind)) continue;
    if (kind == "tensor") {
      FakeTensorDecl d;
      std::string direction, dtype;
      words >> direction >> d.name >> dtype;
      if ((direction != "in" && direction != "out") || !ParseDtype(dtype, &d.dtype)) {
        delete m;
        return NRT_INVALID;
      }
      d.output = direction == "out";
      d.size = DtypeSize(d.dtype);
      for (uint32_t dim; words >> dim;) {
        d.shape.push_back(dim);
        d.size *= dim;
      }
      m->tensors.push_back(d);
    } else if (kind == "alias") {
      std::string out, in;
      words >> out >> in;
      const FakeTensorDecl* o = Decl(m, out);
      const FakeTensorDecl* i = Decl(m, in);
      if (!o || !i || !o->output || i->output || o->size != i->size) {
        delete m;
        return NRT_INVALID;
      }
      m->aliases.emplace_back(out, in);
    } else if (kind == "compute") {
      std::vector<std::string> args;
      for (std::string w; words >> w;) args.push_back(w);
      m->computes.push_back(args);
    } else {
      delete m;
      return NRT_INVALID;
    }
  }
  for (const auto& c : m->computes) {  // after the loop: a compute may name tensors declared after it
    if (!c.empty() && c[0] == "torchscript" && !ParseTorchScript(m, c)) {
      delete m;
      return NRT_INVALID;
    }
  }
  ++S().live_models;
  *model = m;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_unload(nrt_model_t* model) {
  std::lock_guard<std::mutex> lock(S().mu);
  Log("nrt_unload vnc=" + std::to_string(model->vnc));
  // A failing unload is reported but still frees the model: the tests check the report, and the live counts stay
  // meaningful for the tests that follow in the same process.
  NRT_STATUS status = NRT_SUCCESS;
  if (!Fails("nrt_unload", &status)) ++S().unloads;
  --S().live_models;
  delete model;
  return status;
}

NRT_STATUS nrt_get_model_tensor_info(nrt_model_t* model, nrt_tensor_info_array_t** tensor_info) {
  std::lock_guard<std::mutex> lock(S().mu);
  NRT_STATUS status;
  if (Fails("nrt_get_model_tensor_info", &status)) return status;
  const size_t n = model->tensors.size();
  void* raw = std::calloc(1, sizeof(nrt_tensor_info_array_t) + n * sizeof(nrt_tensor_info_t));
  auto* array = static_cast<nrt_tensor_info_array_t*>(raw);
  array->tensor_count = n;
  for (size_t i = 0; i < n; ++i) {
    const FakeTensorDecl& d = model->tensors[i];
    nrt_tensor_info_t& info = array->tensor_array[i];
    std::strncpy(info.name, d.name.c_str(), NRT_TENSOR_NAME_MAX - 1);
    info.usage = d.output ? NRT_TENSOR_USAGE_OUTPUT : NRT_TENSOR_USAGE_INPUT;
    info.size = d.size;
    info.dtype = d.dtype;
    info.ndim = static_cast<uint32_t>(d.shape.size());
    info.shape = static_cast<uint32_t*>(std::calloc(d.shape.size() + 1, sizeof(uint32_t)));
    for (size_t k = 0; k < d.shape.size(); ++k) info.shape[k] = d.shape[k];
  }
  *tensor_info = array;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* tensor_info) {
  std::lock_guard<std::mutex> lock(S().mu);
  for (uint64_t i = 0; i < tensor_info->tensor_count; ++i) std::free(tensor_info->tensor_array[i].shape);
  std::free(tensor_info);
  NRT_STATUS status;
  if (Fails("nrt_free_model_tensor_info", &status)) return status;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t placement, int vnc, size_t size, const char* name,
                               nrt_tensor_t** tensor) {
  std::lock_guard<std::mutex> lock(S().mu);
  NRT_STATUS status;
  if (Fails("nrt_tensor_allocate", &status)) return status;
  *tensor = new nrt_tensor{std::vector<unsigned char>(size, 0xAB), placement, vnc, name ? name : ""};
  ++S().allocations[placement];
  S().allocation_names.push_back((*tensor)->name);
  ++S().live_tensors;
  return NRT_SUCCESS;
}

void nrt_tensor_free(nrt_tensor_t** tensor) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (*tensor == nullptr) return;
  --S().live_tensors;
  delete *tensor;
  *tensor = nullptr;
}

NRT_STATUS nrt_tensor_write(nrt_tensor_t* tensor, const void* buf, size_t offset, size_t size) {
  std::lock_guard<std::mutex> lock(S().mu);
  NRT_STATUS status;
  if (Fails("nrt_tensor_write", &status)) return status;
  if (offset + size > tensor->bytes.size()) return NRT_INVALID;
  std::memcpy(tensor->bytes.data() + offset, buf, size);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_read(const nrt_tensor_t* tensor, void* buf, size_t offset, size_t size) {
  std::lock_guard<std::mutex> lock(S().mu);
  NRT_STATUS status;
  if (Fails("nrt_tensor_read", &status)) return status;
  if (offset + size > tensor->bytes.size()) return NRT_INVALID;
  std::memcpy(buf, tensor->bytes.data() + offset, size);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** result) {
  std::lock_guard<std::mutex> lock(S().mu);
  NRT_STATUS status;
  if (Fails("nrt_allocate_tensor_set", &status)) return status;
  *result = new TensorSet();
  ++S().live_sets;
  return NRT_SUCCESS;
}

void nrt_destroy_tensor_set(nrt_tensor_set_t** tensor_set) {
  std::lock_guard<std::mutex> lock(S().mu);
  delete static_cast<TensorSet*>(*tensor_set);
  *tensor_set = nullptr;
  --S().live_sets;
}

NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* tensor_set, const char* tensor_name, nrt_tensor_t* tensor) {
  std::lock_guard<std::mutex> lock(S().mu);
  NRT_STATUS status;
  if (Fails("nrt_add_tensor_to_tensor_set", &status)) return status;
  (*static_cast<TensorSet*>(tensor_set))[tensor_name] = tensor;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_execute(nrt_model_t* model, const nrt_tensor_set_t* input_set, nrt_tensor_set_t* output_set) {
  std::unique_lock<std::mutex> lock(S().mu);
  NRT_STATUS status;
  if (Fails("nrt_execute", &status)) return status;
  const auto& inputs = *static_cast<const TensorSet*>(input_set);
  auto& outputs = *static_cast<TensorSet*>(output_set);
  std::map<std::string, nrt_tensor_t*> bound;
  for (const FakeTensorDecl& d : model->tensors) {
    const TensorSet& set = d.output ? outputs : inputs;
    auto it = set.find(d.name);
    if (it == set.end()) return NRT_EXEC_BAD_INPUT;
    nrt_tensor_t* t = it->second;
    if (t->bytes.size() != d.size || t->placement != NRT_TENSOR_PLACEMENT_DEVICE || t->vnc != model->vnc) {
      return NRT_EXEC_BAD_INPUT;
    }
    bound[d.name] = t;
  }
  for (const auto& [out, in] : model->aliases) {
    if (bound[out] != bound[in]) {
      std::fprintf(stderr, "fake libnrt: nrt_execute: output %s aliases input %s, but another tensor is bound to it\n",
                   out.c_str(), in.c_str());
      return NRT_EXEC_BAD_INPUT;
    }
  }
  for (const auto& c : model->computes) {
    if (c.size() == 5 && c[0] == "mul_mask") {
      const FakeTensorDecl* x = Decl(model, c[1]);
      const FakeTensorDecl* w = Decl(model, c[2]);
      const FakeTensorDecl* len = Decl(model, c[3]);
      if (!x || !w || !len || !Decl(model, c[4]) || x->shape.size() < 2) return NRT_INVALID;
      const size_t rows = x->shape[0], steps = x->shape[1];
      const size_t per_step = x->size / 4 / rows / steps;
      const auto* xs = reinterpret_cast<const float*>(bound[c[1]]->bytes.data());
      const auto* ws = reinterpret_cast<const float*>(bound[c[2]]->bytes.data());
      auto* ys = reinterpret_cast<float*>(bound[c[4]]->bytes.data());
      for (size_t b = 0; b < rows; ++b) {
        const int64_t n = LengthAt(bound[c[3]], len->dtype, b);
        for (size_t t = 0; t < steps; ++t) {
          for (size_t f = 0; f < per_step; ++f) {
            const size_t i = (b * steps + t) * per_step + f;
            ys[i] = static_cast<int64_t>(t) < n ? xs[i] * ws[f] : 0.0f;
          }
        }
      }
    } else if (c.size() == 3 && c[0] == "copy_lengths") {
      const FakeTensorDecl* out = Decl(model, c[2]);
      if (!out || out->size != bound[c[1]]->bytes.size()) return NRT_INVALID;
      bound[c[2]]->bytes = bound[c[1]]->bytes;
    } else if (c.empty() || c[0] != "torchscript") {
      return NRT_INVALID;
    }
  }
  if (model->graph) {
    const auto args = Buffers(model, model->graph_args, bound);
    const auto outputs = Buffers(model, model->graph_outputs, bound);
    // The caller keeps the tensors alive and unchanged until nrt_execute returns: run outside the mutex.
    lock.unlock();
    std::string error;
    const bool ran = model->graph->Run(args, outputs, &error);
    lock.lock();
    if (!ran) {
      std::fprintf(stderr, "fake libnrt: nrt_execute: %s\n", error.c_str());
      return NRT_EXEC_COMPLETED_WITH_ERR;
    }
  }
  ++S().executes;
  return NRT_SUCCESS;
}

// ---- Test controls ----

void fake_nrt_reset() {
  std::lock_guard<std::mutex> lock(S().mu);
  State& s = S();
  s.init_calls = s.close_calls = s.executes = s.unloads = 0;
  s.allocations.clear();
  s.allocation_names.clear();
  s.loads.clear();
  s.fail_next.clear();
}
void fake_nrt_fail_next(const char* function, int status) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().fail_next[function] = status;
}
int fake_nrt_counter(const char* what) {
  std::lock_guard<std::mutex> lock(S().mu);
  const State& s = S();
  const std::string w = what;
  if (w == "init") return s.init_calls;
  if (w == "close") return s.close_calls;
  if (w == "execute") return s.executes;
  if (w == "live_models") return s.live_models;
  if (w == "live_tensors") return s.live_tensors;
  if (w == "live_sets") return s.live_sets;
  if (w == "device_allocations") return s.allocations.count(NRT_TENSOR_PLACEMENT_DEVICE) ? s.allocations.at(NRT_TENSOR_PLACEMENT_DEVICE) : 0;
  if (w == "host_allocations") return s.allocations.count(NRT_TENSOR_PLACEMENT_HOST) ? s.allocations.at(NRT_TENSOR_PLACEMENT_HOST) : 0;
  if (w == "loads") return static_cast<int>(s.loads.size());
  if (w == "unloads") return s.unloads;
  return -1;
}
int fake_nrt_allocations_named(const char* prefix) {
  std::lock_guard<std::mutex> lock(S().mu);
  return CountNamed(prefix);
}
// The i-th nrt_load's vnc (which = 0) or vnc_count (which = 1).
int fake_nrt_load_arg(int i, int which) {
  std::lock_guard<std::mutex> lock(S().mu);
  const auto& l = S().loads.at(static_cast<size_t>(i));
  return which == 0 ? l.first : l.second;
}

}  // extern "C"
