"""Word error rate for the Whisper checks: both texts lower-cased, every character but letters, digits and the
apostrophe turned into a space (Whisper writes punctuation and capitals, the references have them too, and
neither counts as an error), then split on spaces; errors = the word-level Levenshtein distance (substitutions +
deletions + insertions), WER = errors / reference words over the whole set."""
import re
from typing import Iterable, List, Tuple


def normalize(text: str) -> List[str]:
    return re.sub(r"[^a-z0-9']+", " ", text.lower().replace("\u2019", "'")).split()


def word_errors(ref: List[str], hyp: List[str]) -> int:
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def corpus_wer(pairs: Iterable[Tuple[str, str]]) -> Tuple[float, int, int]:
    """(WER, errors, reference words) over (reference, hypothesis) pairs."""
    errors = words = 0
    for ref, hyp in pairs:
        r = normalize(ref)
        errors += word_errors(r, normalize(hyp))
        words += len(r)
    return errors / max(1, words), errors, words
