"""Reference embeddings for minilm_embeddings_test.sh: transformers (AutoTokenizer + AutoModel) on the checkpoint,
mean pooling over the attention mask and L2 normalisation, as sentence-transformers' all-MiniLM-L6-v2 computes them.
Each text alone (no padding), float64 pooling; special-token look-alikes in a text ("[CLS]") tokenized as text,
as sluice does. Also runs the exported graphs directly on the same ids as a first
check that the export itself is right (before any server is involved).

  python minilm_reference.py CHECKPOINT_DIR EXPORT_DIR OUT.json
Writes {"texts": [...], "embeddings": [[...]], "tokens": [n, ...], "too_long": TEXT, "limit": L}.
"""
import json
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backend", "compile"))
import graph_format  # noqa: E402

# Mixed lengths (so they fall into different buckets), cased and accented text (BertNormalizer lowercases and
# strips accents), CJK (split per character), emoji and unknown pieces, punctuation runs, digits.
TEXTS = [
    "Hello!",
    "A man is eating food.",
    "The quick brown fox jumps over the lazy dog, and the dog does not seem to mind at all.",
    "Crème brûlée at the Café Müller costs 7,50 € — naïve pricing?",
    "東京は日本の首都です。北京是中国的首都。",
    "Emoji 🙂🚀 and symbols ### $$$ !!! ... ??? [CLS] is just text here.",
    "Sentence embeddings map text to vectors; similar sentences get nearby vectors. " * 4,
    ("In 1969, Apollo 11 landed on the Moon. Neil Armstrong and Buzz Aldrin walked on the surface while Michael "
     "Collins orbited above. ") * 5,
]


def main() -> int:
    ckpt, export, out = sys.argv[1:4]
    torch.manual_seed(0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(ckpt)
    model = transformers.AutoModel.from_pretrained(ckpt).eval()
    graph = graph_format.load_graph(export, "b1_l256").eval()
    limit = 256
    embeddings, tokens = [], []
    # sluice tokenizes user text with special-token look-alikes as text (server/llm/tokenizer.h): transformers'
    # split_special_tokens=True. Only the text holding "[CLS]" differs from the default.
    for text in TEXTS:
        enc = tokenizer(text, return_tensors="pt", split_special_tokens=True)
        plain = tokenizer(text)["input_ids"]
        assert (plain == enc["input_ids"][0].tolist()) == ("[CLS]" not in text), f"{text!r}: split_special_tokens"
        n = enc["input_ids"].shape[1]
        assert n <= limit, f"reference text of {n} tokens is over the largest bucket {limit}"
        with torch.no_grad():
            hidden = model(**enc).last_hidden_state[0].double()
            mask = enc["attention_mask"][0].double().unsqueeze(-1)
            pooled = (hidden * mask).sum(0) / mask.sum()
            reference = torch.nn.functional.normalize(pooled, dim=0)
            padded = torch.zeros(1, limit, dtype=torch.int64)
            padded[0, :n] = enc["input_ids"][0]
            exported = graph(padded, torch.tensor([n]))[0][0].double()
        cosine = float(exported @ reference)
        assert 1 - cosine < 1e-5, f"exported graph vs transformers: cosine distance {1 - cosine:.2e} for {text!r}"
        embeddings.append(reference.tolist())
        tokens.append(n)
    too_long = "word " * 300
    long_tokens = len(tokenizer(too_long, split_special_tokens=True)["input_ids"])
    assert long_tokens > limit
    with open(out, "w") as f:
        json.dump({"texts": TEXTS, "embeddings": embeddings, "tokens": tokens, "too_long": too_long,
                   "too_long_tokens": long_tokens, "limit": limit}, f)
    print(f"reference: {len(TEXTS)} texts, {min(tokens)}..{max(tokens)} tokens; exported graph b1_l{limit} within "
          "1e-5 cosine of transformers on each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
