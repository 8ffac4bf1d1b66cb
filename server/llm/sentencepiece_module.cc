// The loadable module around Debian's libsentencepiece (see sentencepiece_bridge.h for why it is a module): a C
// interface over SentencePieceProcessor. Results go to the caller's sink, so no allocation crosses the module edge.
// No Abseil header may be included here (Debian's sentencepiece_processor.h declares its own absl::string_view).
// Thread-safety: a loaded processor is immutable; encode/decode/size are safe from any thread.
#include <cstddef>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

extern "C" {

// A processor, or nullptr with the reason written to `error` (NUL-terminated, cut to error_size).
__attribute__((visibility("default"))) void* sluice_sp_load(const char* path, char* error, size_t error_size) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  const sentencepiece::util::Status status = processor->Load(path);
  if (status.ok()) return processor;
  const std::string message = status.ToString();
  if (error_size > 0) {
    const size_t n = message.size() < error_size - 1 ? message.size() : error_size - 1;
    message.copy(error, n);
    error[n] = '\0';
  }
  delete processor;
  return nullptr;
}

__attribute__((visibility("default"))) void sluice_sp_free(void* processor) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(processor);
}

__attribute__((visibility("default"))) int sluice_sp_size(const void* processor) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->GetPieceSize();
}

// The longest piece in bytes ("\u2581" counted as its 3 bytes): what bounds the input bytes one token can cover.
__attribute__((visibility("default"))) int sluice_sp_max_piece_bytes(const void* processor) {
  const auto* sp = static_cast<const sentencepiece::SentencePieceProcessor*>(processor);
  size_t longest = 0;
  for (int id = 0; id < sp->GetPieceSize(); ++id) {
    const size_t n = sp->IdToPiece(id).size();
    if (n > longest) longest = n;
  }
  return static_cast<int>(longest);
}

// Encoding cannot fail on a loaded model (unknown text becomes byte pieces or <unk>).
__attribute__((visibility("default"))) void sluice_sp_encode(const void* processor, const char* text, size_t length,
                                                             void (*sink)(void*, const int*, size_t), void* context) {
  std::vector<int> ids;
  static_cast<const sentencepiece::SentencePieceProcessor*>(processor)
      ->Encode(std::string(text, length), &ids)
      .IgnoreError();
  sink(context, ids.data(), ids.size());
}

__attribute__((visibility("default"))) void sluice_sp_decode(const void* processor, const int* ids, size_t count,
                                                             void (*sink)(void*, const char*, size_t), void* context) {
  std::string text;
  static_cast<const sentencepiece::SentencePieceProcessor*>(processor)
      ->Decode(std::vector<int>(ids, ids + count), &text)
      .IgnoreError();
  sink(context, text.data(), text.size());
}

}  // extern "C"
