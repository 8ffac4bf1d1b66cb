#include "server/llm/sentencepiece_bridge.h"

#include <dlfcn.h>
#include <link.h>  // LM_ID_NEWLM
#include <unistd.h>

#include <climits>
#include <cstddef>

namespace sluice {
namespace {

// The module's C interface (sentencepiece_module.cc).
struct Module {
  void* (*load)(const char*, char*, size_t) = nullptr;
  void (*free)(void*) = nullptr;
  int (*size)(const void*) = nullptr;
  int (*max_piece_bytes)(const void*) = nullptr;
  void (*encode)(const void*, const char*, size_t, void (*)(void*, const int*, size_t), void*) = nullptr;
  void (*decode)(const void*, const int*, size_t, void (*)(void*, const char*, size_t), void*) = nullptr;
  std::string error;  // why it could not be loaded
};

std::string ExecutableDir() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "";
  const std::string exe(path, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/') + 1);
}

// The sanitizers' runtimes refuse RTLD_DEEPBIND. There the module is loaded into a link-map namespace of its own
// (dlmopen LM_ID_NEWLM: its own libc, libstdc++ and libsentencepiece, whose protobuf-lite cannot meet the binary's
// libprotobuf), so sanitizer builds of binaries with gRPC (the generation service tests) can load it too. That
// needs the module itself uninstrumented (no sanitizer runtime in that namespace; tests/asan builds it so) and
// nothing allocated crossing the C interface (none does: results go to the caller's sink).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLUICE_SP_OWN_NAMESPACE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SLUICE_SP_OWN_NAMESPACE 1
#endif
#endif

void* OpenModule(const std::string& path) {
#ifdef SLUICE_SP_OWN_NAMESPACE
  return ::dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
#else
  return ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
#endif
}

Module LoadModule() {
  Module m;
  void* handle = nullptr;
  for (const std::string& candidate :
       {ExecutableDir() + "libsluice_sentencepiece.so", std::string(SLUICE_SENTENCEPIECE_MODULE)}) {
    handle = OpenModule(candidate);
    if (handle != nullptr) break;
    m.error += std::string(m.error.empty() ? "" : "; ") + ::dlerror();
  }
  if (handle == nullptr) return m;
  m.load = reinterpret_cast<decltype(m.load)>(::dlsym(handle, "sluice_sp_load"));
  m.free = reinterpret_cast<decltype(m.free)>(::dlsym(handle, "sluice_sp_free"));
  m.size = reinterpret_cast<decltype(m.size)>(::dlsym(handle, "sluice_sp_size"));
  m.max_piece_bytes = reinterpret_cast<decltype(m.max_piece_bytes)>(::dlsym(handle, "sluice_sp_max_piece_bytes"));
  m.encode = reinterpret_cast<decltype(m.encode)>(::dlsym(handle, "sluice_sp_encode"));
  m.decode = reinterpret_cast<decltype(m.decode)>(::dlsym(handle, "sluice_sp_decode"));
  if (!m.load || !m.free || !m.size || !m.max_piece_bytes || !m.encode || !m.decode) {
    m.error = "libsluice_sentencepiece.so lacks the sluice_sp_* functions";
    m.load = nullptr;
  }
  m.error = m.load ? "" : "cannot load the SentencePiece module: " + m.error;
  return m;  // the handle stays open for the process's life
}

const Module& TheModule() {
  static const Module* module = new Module(LoadModule());
  return *module;
}

}  // namespace

std::unique_ptr<SentencePieceBridge> SentencePieceBridge::Load(const std::string& path, std::string* error) {
  const Module& m = TheModule();
  if (m.load == nullptr) {
    *error = m.error;
    return nullptr;
  }
  char message[512] = "";
  void* processor = m.load(path.c_str(), message, sizeof message);
  if (processor == nullptr) {
    *error = message;
    return nullptr;
  }
  return std::unique_ptr<SentencePieceBridge>(new SentencePieceBridge(processor));
}

SentencePieceBridge::~SentencePieceBridge() { TheModule().free(processor_); }

std::vector<int> SentencePieceBridge::Encode(const std::string& text) const {
  std::vector<int> ids;
  TheModule().encode(
      processor_, text.data(), text.size(),
      [](void* out, const int* data, size_t n) { static_cast<std::vector<int>*>(out)->assign(data, data + n); }, &ids);
  return ids;
}

std::string SentencePieceBridge::Decode(const std::vector<int>& ids) const {
  std::string text;
  TheModule().decode(
      processor_, ids.data(), ids.size(),
      [](void* out, const char* data, size_t n) { static_cast<std::string*>(out)->assign(data, n); }, &text);
  return text;
}

int SentencePieceBridge::size() const { return TheModule().size(processor_); }

int SentencePieceBridge::max_piece_bytes() const { return TheModule().max_piece_bytes(processor_); }

}  // namespace sluice
