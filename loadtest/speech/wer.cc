#include "loadtest/speech/wer.h"

#include <algorithm>
#include <cctype>

namespace sluice::loadtest {

std::vector<std::string> NormalizeWords(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80 && std::isspace(byte)) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else if (byte < 0x80 && std::ispunct(byte)) {
      continue;  // "it's" -> "its", "a.b" -> "ab", as jiwer's RemovePunctuation does
    } else {
      word.push_back(byte < 0x80 ? static_cast<char>(std::tolower(byte)) : c);
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// A plain O(n·m) dynamic programme: no C++ library for word-level edit scripts is packaged here, and the
// S/I/D split needs the backtrace, which a distance-only routine would not give.
WordErrors CountWordErrors(std::string_view reference, std::string_view hypothesis) {
  const std::vector<std::string> ref = NormalizeWords(reference);
  const std::vector<std::string> hyp = NormalizeWords(hypothesis);
  const size_t n = ref.size(), m = hyp.size();
  // d[i * (m + 1) + j]: the distance between ref[:i] and hyp[:j].
  std::vector<int64_t> d((n + 1) * (m + 1));
  const auto at = [&](size_t i, size_t j) -> int64_t& { return d[i * (m + 1) + j]; };
  for (size_t i = 0; i <= n; ++i) at(i, 0) = static_cast<int64_t>(i);
  for (size_t j = 0; j <= m; ++j) at(0, j) = static_cast<int64_t>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int64_t diagonal = at(i - 1, j - 1) + (ref[i - 1] == hyp[j - 1] ? 0 : 1);
      at(i, j) = std::min({diagonal, at(i - 1, j) + 1, at(i, j - 1) + 1});
    }
  }
  WordErrors errors;
  errors.reference_words = static_cast<int64_t>(n);
  size_t i = n, j = m;
  while (i > 0 || j > 0) {
    if (i > 0 && j > 0 && at(i, j) == at(i - 1, j - 1) + (ref[i - 1] == hyp[j - 1] ? 0 : 1)) {
      if (ref[i - 1] != hyp[j - 1]) ++errors.substitutions;
      --i, --j;
    } else if (i > 0 && at(i, j) == at(i - 1, j) + 1) {
      ++errors.deletions;
      --i;
    } else {
      ++errors.insertions;
      --j;
    }
  }
  return errors;
}

}  // namespace sluice::loadtest
