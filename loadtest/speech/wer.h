// Word error rate of transcripts against references: both are normalised (ASCII letters lowercased, every
// ASCII punctuation character removed, split at whitespace; other bytes, e.g. UTF-8 letters, are kept as they
// are), then aligned by a word-level Levenshtein distance whose minimal edit script is counted as
// substitutions, insertions (hypothesis words with no reference word) and deletions (reference words missed).
// Corpus WER = the sum of errors over the sum of reference words (not a mean of per-utterance rates).
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "loadtest/core/word_errors.h"

namespace sluice::loadtest {

// "Hello, World!  it's" -> {"hello", "world", "its"}.
std::vector<std::string> NormalizeWords(std::string_view text);

// The minimal edit script's counts; among scripts of equal length, substitutions are preferred (the usual
// convention, as in sclite and jiwer).
WordErrors CountWordErrors(std::string_view reference, std::string_view hypothesis);

}  // namespace sluice::loadtest
