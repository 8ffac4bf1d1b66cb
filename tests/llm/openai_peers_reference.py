"""Expected greedy generations of a `sim`-device generation model, for openai_peers_check.py.

The sim device's logits are a documented function of the token ids in a sequence's KV slot
(backend/sim_generation_backend.h): greedy decoding picks
    next = (31 * t[p] + 7 * p + t[0] + ... + t[p]) mod vocab_size
for the sequence's ids t[0..p] (prompt with BOS, then every generated token). This script computes, with the model's
SentencePiece tokenizer, what sluice must answer for each case: prompt token count, generated ids (up to max_tokens
or EOS) and their text, independently of the server's code.

  /usr/bin/python3 openai_peers_reference.py TOKENIZER VOCAB BOS EOS CHAT_TEMPLATE_JSON CASES_JSON OUT_JSON
CASES_JSON: {name: {"prompt": str | [ids] | "messages": [{role, content}], "max_tokens": n}}.
"""
import json
import sys

import sentencepiece as spm


def sim_next(ids, vocab):
    p = len(ids) - 1
    return (31 * ids[p] + 7 * p + sum(ids)) % vocab


def main() -> int:
    tokenizer, vocab, bos, eos, template_json, cases_json, out_json = sys.argv[1:8]
    vocab, bos, eos = int(vocab), int(bos), int(eos)
    template = json.loads(template_json)
    sp = spm.SentencePieceProcessor(model_file=tokenizer)
    cases = json.load(open(cases_json))
    out = {}
    for name, case in cases.items():
        if "messages" in case:
            text = "".join(template[m["role"]] + m["content"] + template["separator"] for m in case["messages"])
            prompt = [bos] + sp.encode(text + template["assistant"])
        elif isinstance(case["prompt"], list):
            prompt = list(case["prompt"])
        else:
            prompt = [bos] + sp.encode(case["prompt"])
        ids = list(prompt)
        generated = []
        finish = "length"
        for _ in range(case["max_tokens"]):
            token = sim_next(ids, vocab)
            ids.append(token)
            if token == eos:
                finish = "stop"
                break
            generated.append(token)
        out[name] = {"prompt_tokens": len(prompt), "ids": generated, "text": sp.decode(generated),
                     "completion_tokens": len(generated) + (1 if finish == "stop" else 0), "finish": finish}
    json.dump(out, open(out_json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
