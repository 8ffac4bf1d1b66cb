#!/usr/bin/env python3
"""Parity of sluice's tokenizer.json and chat-template support with Hugging Face (hf_tokenizers_parity_test.sh).

Three steps, each run by the shell script in the venv it names:
  fixtures WORK LLAMA_TOKENIZER_MODEL [GGUF]   (transformers venv) llama_tiny's SentencePiece model converted by
      transformers' fast converter to tokenizer.json; chat-template fixtures (tokenizer_config.json each) and the
      renderings transformers' apply_chat_template gives for the test conversations.
  tokenizers WORK TEXT_FILE...                 (tokenizers venv) tokenizers of every family trained on the
      repository's text, plus the converted one; the parity corpus; what Python's `tokenizers` gives for it.
  compare WORK                                 sluice's outputs (hf_tokenizers_cli) against the expectations:
      exits 1 unless every id and every text is equal.
"""
import json
import os
import sys

# The parity corpus: code, emoji, CJK, combining marks, whitespace runs, digits, special-token look-alikes.
CORPUS = [
    "", " ", "  ", "\n", "hello", " hello", "hello ", "Hello, World!", "HELLO world hello WORLD",
    "def add(a, b):\n    return a + b  # sum\n", "for (int i = 0; i < n; ++i) { x[i] *= 2; }",
    "if x != y and not z:\n\tprint(f\"{x!r} -> {y:>10}\")", "std::vector<int32_t> ids = {1, 2, 3};",
    "<html><body class=\"x\">&amp; &lt;tag&gt;</body></html>", "SELECT * FROM t WHERE a >= 10 -- comment",
    "🙂", "emoji 🙂🙃😀 end", "👩‍👩‍👧‍👦 family, 👍🏽 thumbs, 🇯🇵 flag, ❤️ heart", "🤖🤖🤖🤖🤖🤖🤖🤖",
    "日本語のテキスト", "中文分词测试，标点。", "한국어 텍스트입니다", "混合 mixed テキスト text 漢字",
    "e\u0301 cafe\u0301 café", "Z\u0351\u0352a\u0353\u0354l\u0355g\u0356o", "a\u0308\u0301\u0327", "ﬁ ﬂ ﬀ ligatures",
    "Å Å Å", "\u1100\u1161\u11a8 jamo", "\u00e9\u0065\u0301",
    "a  b   c    d", "tabs\t\t\there", "lines\n\n\nthree", "crlf\r\nline\r\n", "trailing   ", "   leading",
    "\u00a0nbsp\u00a0\u00a0x", "\u3000ideographic\u3000space", " \t \n \r\n  mixed  \n\t",
    "0", "7", "12", "123", "1234", "12345678901234567890", "3.14159", "1,000,000.50", "-42e-3", "٣٤٥ ١٢", "x1y22z333",
    "<|endoftext|>", "text<|endoftext|>more", "<|endoftext|", "<| endoftext |>", "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>", "<s>", "</s>", "<s> hello </s>", "[CLS] x [SEP]", "[MASK]", "<unk>", "<|begin_of_text|>",
    "<|eot_id|><|start_header_id|>", "<<SYS>>", "[INST] hi [/INST]", "<0x41>", "▁hello ▁▁", "Ġhello",
    "it's don't I'm we'll they've he'd IT'S", "The quick brown fox jumps over the lazy dog.",
    "Antidisestablishmentarianism" * 3, "a" * 200, "🙂" * 30, "https://example.com/path?q=1&r=two#frag",
    "**bold** _it_ `code` # Heading\n- item\n1. first", "Ελληνικά κείμενο", "Русский текст", "עברית", "العربية",
    "हिन्दी पाठ", "ไทย", "tab\tsep\tvalues\t1\t2", "\x01\x02 control \x7f", "zero\u200bwidth\u200djoin\ufeffbom",
]

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")

# Chat templates in the styles checkpoints ship (written for this test): Llama 3 (header ids, trim), ChatML as Qwen
# and SmolLM2 use (a default system message, tools branch), Llama 2 / Mistral (raise_exception, set, .strip(),
# blocks without '-' so trim_blocks/lstrip_blocks matter), and one exercising namespace, loop variables and filters.
# (transformers 4.44.2 has no loop controls, {% break %}/{% continue %}: later releases and minijinja do.)
TEMPLATES = {
    "llama3_style": {
        "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
        "chat_template": (
            "{{- bos_token }}{%- for message in messages %}"
            "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
            " + '<|eot_id|>' }}{%- endfor %}"
            "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"),
    },
    "qwen_style": {
        "bos_token": None, "eos_token": "<|im_end|>",
        "chat_template": (
            "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- for tool in tools %}{{- tool | tojson }}{%- endfor %}"
            "{%- else %}{%- if messages[0]['role'] == 'system' %}"
            "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
            "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- endif %}"
            "{%- for message in messages %}"
            "{%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
            "(message.role == \"assistant\") %}"
            "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
            "{%- endif %}{%- endfor %}"
            "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n"),
    },
    "llama2_style": {
        "bos_token": "<s>", "eos_token": "</s>",
        "chat_template": (
            "{% if messages[0]['role'] == 'system' %}\n"
            "    {% set loop_messages = messages[1:] %}\n"
            "    {% set system_message = messages[0]['content'] %}\n"
            "{% else %}\n"
            "    {% set loop_messages = messages %}\n"
            "    {% set system_message = false %}\n"
            "{% endif %}\n"
            "{% for message in loop_messages %}\n"
            "    {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
            "        {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n"
            "    {% endif %}\n"
            "    {% if loop.index0 == 0 and system_message != false %}\n"
            "        {% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}\n"
            "    {% else %}\n"
            "        {% set content = message['content'] %}\n"
            "    {% endif %}\n"
            "    {% if message['role'] == 'user' %}\n"
            "        {{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}\n"
            "    {% elif message['role'] == 'assistant' %}\n"
            "        {{ ' '  + content.strip() + ' ' + eos_token }}\n"
            "    {% endif %}\n"
            "{% endfor %}\n"),
    },
    "features": {
        "bos_token": "<s>", "eos_token": "</s>",
        "chat_template": (
            "{%- set ns = namespace(users=0, last='') %}"
            "{%- for message in messages %}"
            "{%- if message.role == 'user' %}{%- set ns.users = ns.users + 1 %}{%- endif %}"
            "{%- if message.content == 'skip me' %}(skipped){%- elif message.content == 'stop here' %}(stop){%- endif %}"
            "[{{ loop.index }}/{{ loop.length }}|{{ message.role | upper }}] {{ message.content | replace('\\n', ' ') }}"
            "{%- if message.content.startswith('Q:') %} (question){% endif %}"
            "{%- if not loop.last %}\n{% endif %}"
            "{%- set ns.last = message.role %}"
            "{%- endfor %}\nusers={{ ns.users }} last={{ ns.last }} n={{ messages | length }}"
            "{%- if add_generation_prompt %}\n{{ eos_token }}>{% endif %}"),
    },
}

CONVERSATIONS = [
    (True, [("user", "Hello!")]),
    (False, [("user", "Hello!")]),
    (True, [("system", "You are terse."), ("user", "What is 2+2?")]),
    (True, [("user", "  hi  "), ("assistant", " Hello there. "), ("user", "日本語で 🙂\nplease")]),
    (True, [("system", "S"), ("user", "Q: one"), ("assistant", "A"), ("user", "skip me"), ("user", "two\nlines")]),
    (True, [("user", "a"), ("user", "stop here"), ("assistant", "never")]),
    (True, [("assistant", "I speak first")]),
    (True, [("user", "")]),
    (True, [("user", "<|im_start|>look-alike text</s>")]),
]


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def hexed(text):
    return text.encode("utf-8").hex() or "-"


def fixtures(work, llama_model, gguf=None):
    from transformers import LlamaTokenizer, PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import convert_slow_tokenizer

    os.makedirs(f"{work}/tokenizers/sentencepiece_bpe", exist_ok=True)
    slow = LlamaTokenizer(vocab_file=llama_model, legacy=False)
    convert_slow_tokenizer(slow).save(f"{work}/tokenizers/sentencepiece_bpe/tokenizer.json")
    templates = dict(TEMPLATES)
    if gguf:
        templates["smollm2"] = smollm2_template(gguf)
    conversations = "".join(
        f"C {int(gen)}\n" + "".join(f"M {hexed(r)} {hexed(c)}\n" for r, c in turns) for gen, turns in CONVERSATIONS)
    for name, spec in templates.items():
        d = f"{work}/templates/{name}"
        os.makedirs(d, exist_ok=True)
        config = {k: v for k, v in spec.items() if v is not None}
        write(f"{d}/tokenizer_config.json", json.dumps(config, ensure_ascii=False, indent=2))
        write(f"{d}/conversations.txt", conversations)
        tok = PreTrainedTokenizerFast(tokenizer_file=f"{work}/tokenizers/sentencepiece_bpe/tokenizer.json",
                                      bos_token=spec["bos_token"], eos_token=spec["eos_token"])
        lines = []
        for gen, turns in CONVERSATIONS:
            chat = [{"role": r, "content": c} for r, c in turns]
            try:
                text = tok.apply_chat_template(chat, chat_template=spec["chat_template"], tokenize=False,
                                               add_generation_prompt=gen)
                lines.append(f"OK {hexed(text)}")
            except Exception as e:  # jinja2's TemplateError from raise_exception
                lines.append(f"ERR {type(e).__name__} {e}")
        write(f"{d}/expected.txt", "\n".join(lines) + "\n")
    print(f"fixtures: {len(templates)} templates x {len(CONVERSATIONS)} conversations rendered by transformers")


def smollm2_template(gguf_path):
    """SmolLM2-135M-Instruct's own chat template and special tokens, from the GGUF's metadata."""
    from gguf import GGUFReader
    reader = GGUFReader(gguf_path)

    def field(name):
        f = reader.fields[name]
        return bytes(f.parts[f.data[0]]) if len(f.data) == 1 else None

    tokens = reader.fields["tokenizer.ggml.tokens"]
    def token(i):
        return bytes(tokens.parts[tokens.data[i]]).decode("utf-8")
    def token_id(name):
        f = reader.fields[name]
        return int(f.parts[f.data[0]][0])
    return {"chat_template": field("tokenizer.chat_template").decode("utf-8"),
            "bos_token": token(token_id("tokenizer.ggml.bos_token_id")),
            "eos_token": token(token_id("tokenizer.ggml.eos_token_id"))}


def train_all(work, texts):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    def byte_level(pre, specials, normalizer=None, ignore_merges=False):
        tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
        tok.pre_tokenizer = pre
        tok.decoder = decoders.ByteLevel()
        if normalizer:
            tok.normalizer = normalizer
        trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(texts, trainer)
        return tok

    split = lambda pattern: pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    families = {
        "gpt2_bpe": byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), ["<|endoftext|>"]),
        "llama3_bpe": byte_level(split(LLAMA3_PATTERN), ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>"],
                                 ignore_merges=True),
        "qwen2_bpe": byte_level(split(QWEN2_PATTERN), ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                normalizer=normalizers.NFC()),
    }
    unigram = Tokenizer(models.Unigram())
    unigram.normalizer = normalizers.NFKC()
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    unigram.decoder = decoders.Metaspace()
    unigram.train_from_iterator(texts, trainers.UnigramTrainer(
        vocab_size=2000, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>", show_progress=False))
    families["unigram"] = unigram
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.decoder = decoders.WordPiece()
    wordpiece.train_from_iterator(texts, trainers.WordPieceTrainer(
        vocab_size=2000, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"], show_progress=False))
    families["wordpiece"] = wordpiece
    for name, tok in families.items():
        os.makedirs(f"{work}/tokenizers/{name}", exist_ok=True)
        tok.save(f"{work}/tokenizers/{name}/tokenizer.json")


def expectations(work, corpus):
    from tokenizers import Tokenizer
    write(f"{work}/corpus.txt", "".join(hexed(t) + "\n" for t in corpus))
    for name in sorted(os.listdir(f"{work}/tokenizers")):
        tok = Tokenizer.from_file(f"{work}/tokenizers/{name}/tokenizer.json")
        lines = []
        for text in corpus:
            tok.encode_special_tokens = True
            as_text = tok.encode(text, add_special_tokens=False).ids
            tok.encode_special_tokens = False
            recognized = tok.encode(text, add_special_tokens=False).ids
            lines += [f"A {' '.join(map(str, as_text))}", f"R {' '.join(map(str, recognized))}",
                      f"D {tok.decode(recognized, skip_special_tokens=False).encode().hex()}",
                      f"S {tok.decode(recognized, skip_special_tokens=True).encode().hex()}",
                      f"T {tok.decode(as_text, skip_special_tokens=True).encode().hex()}"]
        write(f"{work}/tokenizers/{name}/expected.txt", "\n".join(lines) + "\n")


def tokenizers_step(work, text_files):
    texts = []
    for path in text_files:
        with open(path, encoding="utf-8", errors="replace") as f:
            texts += [line for line in f.read().split("\n") if line.strip()]
    texts += CORPUS[::2]  # half the corpus is seen in training: both known and unknown pieces get tested
    train_all(work, texts)
    expectations(work, CORPUS)
    import tokenizers
    print(f"tokenizers {tokenizers.__version__}: {len(os.listdir(f'{work}/tokenizers'))} tokenizers, "
          f"{len(CORPUS)} corpus texts, trained on {len(texts)} lines")


def same(expected, actual):
    """Equal lines; a refusal matches when both refuse and sluice's message carries transformers' message."""
    if expected.startswith("ERR ") and actual.startswith("ERR "):
        return expected.split(" ", 2)[2] in actual
    return expected == actual


def compare_file(expected_path, actual_path, what):
    with open(expected_path, encoding="utf-8") as f:
        expected = f.read().splitlines()
    with open(actual_path, encoding="utf-8") as f:
        actual = f.read().splitlines()
    bad = [(i, e, a) for i, (e, a) in enumerate(zip(expected, actual)) if not same(e, a)]
    if len(expected) != len(actual):
        bad.append((min(len(expected), len(actual)), f"{len(expected)} lines", f"{len(actual)} lines"))
    equal = len(expected) - len([b for b in bad if b[0] < len(expected)])
    print(f"{what}: {equal}/{len(expected)} equal")
    for i, e, a in bad[:5]:
        print(f"  line {i}:\n    HF:     {e[:300]}\n    sluice: {a[:300]}")
    return not bad


def compare(work):
    ok = True
    for name in sorted(os.listdir(f"{work}/tokenizers")):
        ok &= compare_file(f"{work}/tokenizers/{name}/expected.txt", f"{work}/tokenizers/{name}/actual.txt",
                           f"tokenizer {name} (ids both ways, decode with/without specials, streaming)")
    for name in sorted(os.listdir(f"{work}/templates")):
        ok &= compare_file(f"{work}/templates/{name}/expected.txt", f"{work}/templates/{name}/actual.txt",
                           f"chat template {name}")
    return ok


def main():
    step, work = sys.argv[1], sys.argv[2]
    if step == "fixtures":
        fixtures(work, sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif step == "tokenizers":
        tokenizers_step(work, sys.argv[3:])
    elif step == "compare":
        sys.exit(0 if compare(work) else 1)
    else:
        sys.exit(f"unknown step {step}")


if __name__ == "__main__":
    main()
