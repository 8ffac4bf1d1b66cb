// A word error count: substitutions, insertions and deletions against a number of reference words, as the run's
// summary (summary.h) and reports carry it. speech/wer.h computes it from transcripts.
// Thread-safety: a plain value.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sluice::loadtest {

struct WordErrors {
  int64_t reference_words = 0;
  int64_t substitutions = 0, insertions = 0, deletions = 0;

  int64_t errors() const { return substitutions + insertions + deletions; }
  // errors / reference words; with no reference words: 0 when there are no errors, else 1 per error.
  double rate() const {
    return static_cast<double>(errors()) / static_cast<double>(std::max<int64_t>(reference_words, 1));
  }
  WordErrors& operator+=(const WordErrors& other) {
    reference_words += other.reference_words;
    substitutions += other.substitutions;
    insertions += other.insertions;
    deletions += other.deletions;
    return *this;
  }
};

}  // namespace sluice::loadtest
