"""SentencePiece tokenizer of the example generation model `llama_tiny`, trained at export time.

No tokenizer can be downloaded here, so one is trained from text Debian always ships: the license texts in
/usr/share/common-licenses (base-files), read in sorted order. Training is deterministic: fixed input order,
one thread, no sampling or shuffling of sentences, fixed options. The options are the ones Llama's own
tokenizer uses (BPE, byte_fallback, split_digits, identity normalisation, a dummy prefix, whitespace kept as
is), so Hugging Face's LlamaTokenizer reads the model as a Llama tokenizer. Ids: unk 0, bos 1, eos 2, no pad;
with byte_fallback every UTF-8 string is encodable (no unk).

  /usr/bin/python3 backend/compile/llm_tokenizer.py OUT_DIR [--vocab-size 2000]   # writes OUT_DIR/tokenizer.model
"""
import argparse
import glob
import io
import os
import sys
from typing import List

import sentencepiece as spm

CORPUS_DIR = "/usr/share/common-licenses"
VOCAB_SIZE = 2000
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2


def corpus_lines(corpus_dir: str = CORPUS_DIR) -> List[str]:
    """Every non-blank line of every regular file in corpus_dir, files in sorted order (symlinks such as GPL ->
    GPL-3 skipped, so no text counts twice)."""
    lines = []
    for path in sorted(glob.glob(os.path.join(corpus_dir, "*"))):
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            lines += [line.rstrip("\n") for line in f if line.strip()]
    if not lines:
        raise RuntimeError(f"no training text in {corpus_dir} (Debian's base-files installs it)")
    return lines


def train(out_path: str, vocab_size: int = VOCAB_SIZE, corpus_dir: str = CORPUS_DIR) -> spm.SentencePieceProcessor:
    """Trains and writes out_path (a SentencePiece .model); returns the loaded processor."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus_lines(corpus_dir)),
        model_writer=model,
        model_type="bpe",
        vocab_size=vocab_size,
        character_coverage=1.0,
        byte_fallback=True,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        normalization_rule_name="identity",
        unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=-1,
        num_threads=1,
        input_sentence_size=0,            # all lines, no sampling
        shuffle_input_sentence=False,
        max_sentence_length=16384,
        minloglevel=2,
    )
    with open(out_path, "wb") as f:
        f.write(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=out_path)
    assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (UNK_ID, BOS_ID, EOS_ID, -1)
    return sp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    sp = train(os.path.join(args.out_dir, "tokenizer.model"), args.vocab_size)
    print(f"tokenizer.model: {sp.get_piece_size()} pieces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
