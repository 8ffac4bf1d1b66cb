// SentencePiece behind a loadable module. Debian's libsentencepiece carries (and exports) its own copy of
// protobuf-lite 3.14, while gRPC brings libprotobuf 3.21: linked into one binary, whichever comes first breaks the
// other (libprotobuf's start-up code crashes in sentencepiece's copies of its symbols, or sentencepiece aborts on
// libprotobuf's version check). So libsentencepiece is never linked into a binary: the module
// libsluice_sentencepiece.so (sentencepiece_module.cc, a C interface) links it and is dlopen()ed with
// RTLD_LOCAL | RTLD_DEEPBIND, so that sentencepiece resolves its protobuf symbols within itself and nothing else
// sees them. The module is looked for next to the executable first, then where the build put it. (Sanitizer
// builds, whose runtimes refuse RTLD_DEEPBIND, load it into a link-map namespace of its own with dlmopen: the
// module is built uninstrumented there.)
// (Debian's sentencepiece_processor.h also declares `namespace absl { using std::string_view; }`, which collides
// with the real Abseil: only sentencepiece_module.cc includes it.)
// Thread-safety: immutable after Load; Encode/Decode are const and safe from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace sluice {

class SentencePieceBridge {
 public:
  // nullptr and *error set when the module or the file cannot be loaded.
  static std::unique_ptr<SentencePieceBridge> Load(const std::string& path, std::string* error);
  ~SentencePieceBridge();
  SentencePieceBridge(const SentencePieceBridge&) = delete;
  SentencePieceBridge& operator=(const SentencePieceBridge&) = delete;

  std::vector<int> Encode(const std::string& text) const;
  std::string Decode(const std::vector<int>& ids) const;
  int size() const;
  int max_piece_bytes() const;  // the longest piece's length in bytes

 private:
  explicit SentencePieceBridge(void* processor) : processor_(processor) {}
  void* const processor_;  // owned, freed through the module
};

}  // namespace sluice
