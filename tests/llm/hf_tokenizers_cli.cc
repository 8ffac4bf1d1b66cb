// The C++ side of hf_tokenizers_parity_test.sh: runs sluice's tokenizer.json and chat-template code on the test's
// cases and prints what it got, for hf_tokenizers_parity_check.py to compare with Python's `tokenizers` and
// transformers. Texts travel as hex so any byte survives.
//   hf_tokenizers_cli encode TOKENIZER_JSON CASES   CASES: one hex text per line. Prints per case the lines
//     A <ids as text (kAsText)>   R <ids, special tokens recognized>   D <hex: decode(R), special tokens kept>
//     S <hex: decode(R), special tokens skipped>   T <hex: A streamed through IncrementalDetokenizer>
//   hf_tokenizers_cli render TOKENIZER_CONFIG_JSON CONVERSATIONS   CONVERSATIONS: "C <add_generation_prompt>"
//     then "M <hex role> <hex content>" lines; prints per conversation "OK <hex text>" or "ERR <code> <message>".
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "server/llm/hf_tokenizers/hf_tokenizer.h"
#include "server/llm/hf_tokenizers/include/sluice_hf_tokenizers.h"
#include "server/llm/hf_tokenizers/jinja_chat_template.h"
#include "server/llm/tokenizer.h"

namespace sluice {
namespace {

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string Unhex(const std::string& hex) {  // "-" is the empty text
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::string Ids(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  return out;
}

// decode(ids, skip_special_tokens) straight through the C ABI (the seam's Decode always skips them).
std::string DecodeKeepingSpecials(const std::string& path, const std::vector<int32_t>& ids) {
  static SluiceHfTokenizer* handle = sluice_hf_tokenizer_load(path.c_str(), nullptr);
  std::vector<uint32_t> raw(ids.begin(), ids.end());
  char* text = nullptr;
  size_t length = 0;
  if (sluice_hf_tokenizer_decode(handle, raw.data(), raw.size(), 0, &text, &length, nullptr) != SLUICE_HF_OK) {
    return "<decode failed>";
  }
  std::string result(text, length);
  sluice_hf_text_free(text, length);
  return result;
}

int Encode(const std::string& path, const std::string& cases) {
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tokenizer = HfTokenizer::Load(path);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return 1;
  }
  std::ifstream in(cases);
  std::string line;
  while (std::getline(in, line)) {
    const std::string text = line == "-" ? "" : Unhex(line);
    auto as_text = (*tokenizer)->Tokenize(text, SpecialTokens::kAsText);
    auto recognized = (*tokenizer)->Tokenize(text, SpecialTokens::kRecognized);
    if (!as_text.ok() || !recognized.ok()) {
      std::cerr << "tokenizing failed: " << as_text.status() << " / " << recognized.status() << "\n";
      return 1;
    }
    IncrementalDetokenizer detokenizer(tokenizer->get());
    std::string streamed;
    for (int32_t id : *as_text) streamed += detokenizer.Add(id);
    streamed += detokenizer.Flush();
    std::cout << "A " << Ids(*as_text) << "\nR " << Ids(*recognized) << "\nD "
              << Hex(DecodeKeepingSpecials(path, *recognized)) << "\nS " << Hex((*tokenizer)->Decode(*recognized))
              << "\nT " << Hex(streamed) << "\n";
  }
  return 0;
}

void RenderOne(const JinjaChatTemplate& chat, const std::vector<ChatTurn>& turns, bool add_generation_prompt) {
  absl::StatusOr<std::string> text = chat.Render(turns, add_generation_prompt);
  if (text.ok()) {
    std::cout << "OK " << Hex(*text) << "\n";
  } else {
    std::string message(text.status().message());
    for (char& c : message) c = c == '\n' ? ' ' : c;
    std::cout << "ERR " << absl::StatusCodeToString(text.status().code()) << " " << message << "\n";
  }
}

int Render(const std::string& config, const std::string& conversations) {
  absl::StatusOr<std::unique_ptr<JinjaChatTemplate>> chat = JinjaChatTemplate::Load(config);
  if (!chat.ok()) {
    std::cerr << chat.status() << "\n";
    return 1;
  }
  std::ifstream in(conversations);
  std::string line;
  std::vector<ChatTurn> turns;
  int add_generation_prompt = -1;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, a, b;
    fields >> kind >> a >> b;
    if (kind == "C") {
      if (add_generation_prompt >= 0) RenderOne(**chat, turns, add_generation_prompt == 1);
      turns.clear();
      add_generation_prompt = std::stoi(a);
    } else if (kind == "M") {
      turns.push_back(ChatTurn{a == "-" ? "" : Unhex(a), b == "-" ? "" : Unhex(b)});
    }
  }
  if (add_generation_prompt >= 0) RenderOne(**chat, turns, add_generation_prompt == 1);
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "encode") return sluice::Encode(argv[2], argv[3]);
  if (argc == 4 && std::string(argv[1]) == "render") return sluice::Render(argv[2], argv[3]);
  std::cerr << "usage: hf_tokenizers_cli encode TOKENIZER_JSON CASES | render TOKENIZER_CONFIG_JSON CONVERSATIONS\n";
  return 2;
}
