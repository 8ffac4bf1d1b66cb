#!/usr/bin/env python3
"""The converted Whisper checkpoint and its exported graphs against transformers' own Whisper, on the espeak-ng
test set (whisper_testset.py). Run with a transformers 4.44.2 interpreter (whisper_test.sh's venv):

  whisper_check.py --hf HF_DIR --export EXPORT_DIR --testset DIR --max-wer W [--reference-out FILE]

1. transformers: WhisperFeatureExtractor + WhisperForConditionalGeneration.generate on HF_DIR (greedy, language
   en, task transcribe, no timestamps), 4 clips a batch; the decoded text's WER (wer.py) must be <= W.
2. Front end: whisper.py's mel filters and log-mel (the code inside the encoder graph) against the feature
   extractor's, max |diff| <= 1e-6 and 1e-3 (log-mel values lie in about [-1.5, 1.5]).
3. Encoder graphs (graph format 2, weights.pt once): batches of 4 with the audio past each row's length NaN, one
   padding row (NaN audio, length 0), and one clip at batch 1; each row's hidden states against transformers'
   encoder on the feature extractor's features, max |diff| <= 1e-5 + 1e-4 * max |want| (the front ends' float
   differences, up to ~4e-5 on the log-mel, grow through 6 layers).
4. Decoder graphs, teacher-forced on clip 0 from transformers' encoder output: the admission (prefill) graph and
   decode_b1 against transformers' decoder logits, within float_tolerance.bound; and, reported, the same from the
   encoder graph's output (the whole graph path's logit difference).
5. Greedy decoding driven through the graphs as a continuous batcher would: `slots` KV slots (fewer than the
   clips, so slots are freed at EOS and reused), each admission writing the clip's cross-attention K/V into its
   slot (prefill graph, prompt padded with random ids), decode steps over the active rows in the smallest decode
   batch bucket (padding rows on the scratch slot) and the smallest kv length bucket; Whisper's rules: the
   suppress_tokens always, the begin_suppress_tokens at the first generated step, EOS ends a sequence. Every
   clip's tokens must equal transformers' generate(), except after a step whose reference top-2 margin is a near
   tie: below 4x the whole graph path's logit difference on clip 0 (teacher-forced from the encoder graph's
   output, as in 4.), and at least float_tolerance.NEAR_TIE.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
COMPILE = os.path.join(HERE, "..", "..", "backend", "compile")
sys.path.insert(0, HERE)
sys.path.insert(0, COMPILE)
import float_tolerance  # noqa: E402
import graph_format  # noqa: E402
import wer  # noqa: E402
import whisper  # noqa: E402
import whisper_testset  # noqa: E402

BATCH = 4


def log(msg: str) -> None:
    print(msg, flush=True)


def suppress(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    logits = logits.clone()
    logits[..., ids] = -float("inf")
    return logits


def hf_reference(hf_dir, clips):
    """transformers' greedy tokens (after the 4-token prompt, EOS included), texts, step margins, features and
    encoder hidden states per clip."""
    from transformers import AutoTokenizer, WhisperFeatureExtractor, WhisperForConditionalGeneration
    from transformers.modeling_outputs import BaseModelOutput
    model = WhisperForConditionalGeneration.from_pretrained(hf_dir).eval()
    fe = WhisperFeatureExtractor.from_pretrained(hf_dir)
    tok = AutoTokenizer.from_pretrained(hf_dir)
    gen = model.generation_config
    prompt = [gen.decoder_start_token_id, gen.lang_to_id["<|en|>"], gen.task_to_id["transcribe"],
              gen.no_timestamps_token_id]
    out = {"tokens": [], "texts": [], "margins": [], "features": [], "hidden": [], "prompt": prompt,
           "model": model, "fe": fe}
    for b in range(0, len(clips), BATCH):
        audio = [whisper_testset.read_wav(p) for p, _ in clips[b:b + BATCH]]
        feats = fe(audio, sampling_rate=whisper.SAMPLE_RATE, return_tensors="pt").input_features
        hidden = model.model.encoder(feats).last_hidden_state
        # encoder_outputs: generate() reuses the hidden states computed above instead of encoding again.
        res = model.generate(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), language="en",
                             task="transcribe", return_timestamps=False, output_scores=True,
                             return_dict_in_generate=True)
        seqs = res.sequences
        scores = torch.stack(res.scores, dim=1)  # [b, steps, vocab], after the suppress processors
        for r in range(len(audio)):
            if seqs[r, :4].tolist() != prompt:
                raise SystemExit(f"transformers' prompt {seqs[r, :4].tolist()} != {prompt}")
            ids = seqs[r, 4:].tolist()
            if gen.eos_token_id in ids:
                ids = ids[:ids.index(gen.eos_token_id) + 1]
            top2 = scores[r, :len(ids)].topk(2, dim=-1).values
            out["tokens"].append(ids)
            out["margins"].append((top2[:, 0] - top2[:, 1]).tolist())
            out["texts"].append(tok.decode(ids, skip_special_tokens=True).strip())
            out["features"].append(feats[r])
            out["hidden"].append(hidden[r])
    return out


def check_front_end(ref, clips) -> bool:
    fe = ref["fe"]
    filt = float(np.abs(whisper.mel_filters(fe.feature_size) - fe.mel_filters).max())
    log_mel = whisper.LogMel(fe.feature_size)
    worst = 0.0
    for (path, _), want in zip(clips, ref["features"]):
        audio = torch.zeros(1, whisper.CHUNK_SAMPLES)
        a = torch.from_numpy(whisper_testset.read_wav(path))
        audio[0, :a.numel()] = a
        worst = max(worst, float_tolerance.max_diff(log_mel(audio)[0], want))
    ok = filt <= 1e-6 and worst <= 1e-3
    log(f"front end: mel filters max |diff| {filt:.2e} (bound 1e-6), log-mel max |diff| {worst:.2e} over "
        f"{len(clips)} clips (bound 1e-3): {'ok' if ok else 'FAIL'}")
    return ok


def run_encoders(export_dir, weights, clips, ref, manifest):
    """Graph encoder hidden states per clip; False when any row is off."""
    sizes = manifest["encoder_batch_sizes"]
    if BATCH not in sizes or 1 not in sizes:
        raise SystemExit(f"{export_dir}: the check needs encoder batch sizes 1 and {BATCH}, has {sizes}")
    graphs = {b: graph_format.load_graph(export_dir, f"b{b}_l{whisper.CHUNK_SAMPLES}", weights=weights)
              for b in (1, BATCH)}
    # Groups of BATCH, the last real group one short (a padding row fills it), the last clip alone at batch 1.
    n = len(clips)
    groups = [list(range(i, min(i + BATCH, n - 1))) for i in range(0, n - 1, BATCH)] + [[n - 1]]
    hidden, ok, worst = [None] * n, True, 0.0
    for group in groups:
        size = BATCH if len(group) > 1 else 1
        audio = torch.full((size, whisper.CHUNK_SAMPLES), float("nan"))
        lengths = torch.zeros(size, dtype=torch.long)
        for row, k in enumerate(group):
            a = torch.from_numpy(whisper_testset.read_wav(clips[k][0]))
            audio[row, :a.numel()] = a
            lengths[row] = a.numel()
        out = graphs[size](audio, lengths)[0]  # bucket graphs return a tuple of their outputs
        for row, k in enumerate(group):
            want = ref["hidden"][k]
            diff = float_tolerance.max_diff(out[row], want)
            bound = float_tolerance.bound(want, rtol=1e-4)
            worst = max(worst, diff / bound)
            if not diff <= bound:
                log(f"  encoder clip {k} (batch {size}, row {row}): max |diff| {diff:.3e} > {bound:.3e}")
                ok = False
            hidden[k] = out[row:row + 1].clone()
    log(f"encoder graphs: {n} clips in batches {[len(g) for g in groups]} (padded to {BATCH} / 1), worst "
        f"max|diff| / bound {worst:.3f}: {'ok' if ok else 'FAIL'}")
    return hidden, ok


class Caches:
    def __init__(self, manifest):
        self.self_k = torch.zeros(manifest["self_cache_shape"])
        self.self_v = torch.zeros(manifest["self_cache_shape"])
        self.cross_k = torch.zeros(manifest["cross_k_shape"])
        self.cross_v = torch.zeros(manifest["cross_v_shape"])

    def all(self):
        return self.self_k, self.self_v, self.cross_k, self.cross_v


def smallest(buckets, need: int) -> int:
    fits = [b for b in buckets if b >= need]
    if not fits:
        raise SystemExit(f"no bucket >= {need} in {buckets}")
    return min(fits)


class GraphDecoder:
    def __init__(self, export_dir, weights, manifest):
        self.m = manifest
        self.prefill = {length: graph_format.load_graph(export_dir, f"prefill_l{length}", weights=weights)
                        for length in manifest["prefill_lengths"]}
        self.decode = {(b, k): graph_format.load_graph(export_dir, f"decode_b{b}_k{k}", weights=weights)
                       for b in manifest["decode_batch_sizes"] for k in manifest["kv_lengths"]}
        self.suppress_ids = torch.tensor(manifest["suppress_tokens"])
        self.begin_ids = torch.tensor(manifest["suppress_tokens"] + manifest["begin_suppress_tokens"])
        self.scratch = manifest["slots"]
        self.rng = torch.Generator().manual_seed(2027)

    def admit(self, prompt, slot, hidden, caches):
        length = smallest(self.m["prefill_lengths"], len(prompt))
        tokens = torch.randint(0, self.m["vocab_size"], (1, length), generator=self.rng)  # garbage padding
        tokens[0, :len(prompt)] = torch.tensor(prompt)
        return self.prefill[length](tokens, torch.tensor([len(prompt)]), torch.tensor([slot]), hidden,
                                    *caches.all())

    def step(self, tokens, positions, slots, caches):
        b = smallest(self.m["decode_batch_sizes"], len(tokens))
        k = smallest(self.m["kv_lengths"], max(positions) + 1)
        pad = b - len(tokens)
        return self.decode[(b, k)](torch.tensor(tokens + [0] * pad), torch.tensor(positions + [0] * pad),
                                   torch.tensor(slots + [self.scratch] * pad), *caches.all())[:len(tokens)], (b, k)


def teacher_forced(decoder: GraphDecoder, ref, manifest, graph_hidden):
    """Clip 0's transformers tokens through prefill + decode_b1, from transformers' encoder output (bounded: the
    decoder graphs alone) and from the encoder graph's (reported: the whole graph path's logit difference, which
    sets how close to a tie a greedy step must be for the graphs to be allowed another token there).
    Returns (ok, that difference)."""
    model, prompt, ids = ref["model"], ref["prompt"], ref["tokens"][0]
    hidden = ref["hidden"][0].unsqueeze(0)
    from transformers.modeling_outputs import BaseModelOutput
    seq = torch.tensor([prompt + ids])
    want = model(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), decoder_input_ids=seq).logits[0]
    want = want[len(prompt) - 1:len(prompt) - 1 + len(ids)]
    got = _teacher_forced_logits(decoder, manifest, prompt, ids, hidden)
    diff, bound = float_tolerance.max_diff(got, want), float_tolerance.bound(want)
    ok = diff <= bound
    log(f"decoder graphs, teacher-forced on clip 0 ({len(got)} steps, transformers' encoder output): max |diff| "
        f"{diff:.2e}, bound {bound:.2e} (max |logit| {float(want.abs().max()):.1f}): {'ok' if ok else 'FAIL'}")
    whole = float_tolerance.max_diff(_teacher_forced_logits(decoder, manifest, prompt, ids, graph_hidden), want)
    log(f"whole graph path (encoder graph's output), teacher-forced on clip 0: logits max |diff| {whole:.2e}")
    return ok, whole


def _teacher_forced_logits(decoder, manifest, prompt, ids, hidden):
    caches = Caches(manifest)
    got = [decoder.admit(prompt, 0, hidden, caches)[0]]
    for j, token in enumerate(ids[:-1]):
        got.append(decoder.step([token], [len(prompt) + j], [0], caches)[0][0])
    return torch.stack(got)


def greedy_through_graphs(decoder: GraphDecoder, hidden, prompt, manifest):
    """Continuous batching over the KV slots: every clip's generated tokens (EOS included)."""
    eos, limit = manifest["eos_token_id"], manifest["max_target_positions"]
    caches = Caches(manifest)
    queue = list(range(len(hidden)))
    free = list(range(manifest["slots"]))
    active = {}  # clip -> [slot, next position, tokens]
    done = {}
    buckets, admissions, max_active = {}, 0, 0
    while queue or active:
        while queue and free:
            k, slot = queue.pop(0), free.pop(0)
            logits = suppress(decoder.admit(prompt, slot, hidden[k], caches)[0], decoder.begin_ids)
            token = int(logits.argmax())
            admissions += 1
            if token == eos:
                done[k] = [token]
                free.append(slot)
            else:
                active[k] = [slot, len(prompt), [token]]
        if not active:
            continue
        max_active = max(max_active, len(active))
        order = sorted(active)
        logits, bucket = decoder.step([active[k][2][-1] for k in order], [active[k][1] for k in order],
                                      [active[k][0] for k in order], caches)
        buckets[bucket] = buckets.get(bucket, 0) + 1
        logits = suppress(logits, decoder.suppress_ids)
        for row, k in enumerate(order):
            token = int(logits[row].argmax())
            state = active[k]
            state[2].append(token)
            state[1] += 1
            if token == eos or state[1] + 1 >= limit:
                done[k] = state[2]
                free.append(state[0])
                del active[k]
    return [done[k] for k in range(len(hidden))], {"admissions": admissions, "max_active": max_active,
                                                   "decode_steps_by_bucket": buckets}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hf", required=True)
    p.add_argument("--export", required=True)
    p.add_argument("--testset", required=True)
    p.add_argument("--max-wer", type=float, required=True)
    p.add_argument("--reference-out", help="write transformers' greedy tokens and texts per clip (JSON) here, for "
                   "whisper_server_check.py")
    a = p.parse_args()
    torch.set_grad_enabled(False)
    clips = whisper_testset.read_manifest(a.testset)
    with open(os.path.join(a.export, "whisper.json")) as f:
        manifest = json.load(f)
    failures = []

    t0 = time.monotonic()
    ref = hf_reference(a.hf, clips)
    t_hf = time.monotonic() - t0
    for (path, text), hyp in zip(clips, ref["texts"]):
        log(f"  {os.path.basename(path)}  ref: {text}\n          hyp: {hyp}")
    rate, errors, words = wer.corpus_wer((text, hyp) for (_, text), hyp in zip(clips, ref["texts"]))
    log(f"transformers WER {rate:.4f} ({errors} errors / {words} words, {len(clips)} clips; bound {a.max_wer}) "
        f"in {t_hf:.1f} s")
    if rate > a.max_wer:
        failures.append(f"WER {rate:.4f} > {a.max_wer}")

    t0 = time.monotonic()
    if not check_front_end(ref, clips):
        failures.append("log-mel front end")
    weights = graph_format.read_weights(a.export)
    if weights is None:
        raise SystemExit(f"{a.export}: no weights.pt")
    hidden, ok = run_encoders(a.export, weights, clips, ref, manifest)
    if not ok:
        failures.append("encoder graphs")
    t_enc = time.monotonic() - t0

    t0 = time.monotonic()
    decoder = GraphDecoder(a.export, weights, manifest)
    ok, whole = teacher_forced(decoder, ref, manifest, hidden[0])
    if not ok:
        failures.append("teacher-forced decoder logits")
    # Two logits each off by up to `whole` can swap only where the reference margin is below 2 * whole; 4 * whole
    # (at least float_tolerance.NEAR_TIE) leaves room for clips whose differences run larger than clip 0's.
    near_tie = max(float_tolerance.NEAR_TIE, 4.0 * whole)
    if a.reference_out:
        # near_tie_clips: clips with a reference step closer to a tie than the graphs' logit differences, whose
        # served tokens may therefore differ from these after that step (whisper_server_check.py reports them).
        with open(a.reference_out, "w") as f:
            json.dump({"prompt": ref["prompt"], "tokens": ref["tokens"], "texts": ref["texts"], "near_tie": near_tie,
                       "near_tie_clips": [k for k, ms in enumerate(ref["margins"]) if min(ms) < near_tie]}, f)
    got, stats = greedy_through_graphs(decoder, hidden, ref["prompt"], manifest)
    t_dec = time.monotonic() - t0
    equal = 0
    for k, (g, want, margins) in enumerate(zip(got, ref["tokens"], ref["margins"])):
        step = next((j for j, (x, y) in enumerate(zip(g, want)) if x != y), None)
        if step is None and len(g) != len(want):
            step = min(len(g), len(want))
        allowed = step is not None and step < len(margins) and margins[step] < near_tie
        if step is None:
            equal += 1
        else:
            log(f"  clip {k}: graph tokens leave transformers' at step {step} ({g[step:step + 3]} vs "
                f"{want[step:step + 3]}, reference margin "
                f"{margins[step] if step < len(margins) else 'n/a'}): {f'near tie (< {near_tie:.2g})' if allowed else 'FAIL'}")
            if not allowed:
                failures.append(f"clip {k} tokens")
    total = sum(len(t) for t in ref["tokens"])
    # How close the reference came to a tie anywhere: greedy tokens can only flip between two implementations
    # (front end, kernels, CPUs) at steps whose margin is of the order of their logit differences.
    flat = sorted(m for ms in ref["margins"] for m in ms)
    log(f"transformers' top-2 logit margins over {len(flat)} steps: smallest {flat[0]:.3g}, 1st percentile "
        f"{flat[len(flat) // 100]:.3g}, median {flat[len(flat) // 2]:.3g}")
    log(f"graph greedy decoding: {equal}/{len(clips)} clips token-identical to transformers ({total} tokens), "
        f"{manifest['slots']} slots, {stats['admissions']} admissions, up to {stats['max_active']} rows a step, "
        f"decode steps per (batch, kv) bucket {dict(sorted(stats['decode_steps_by_bucket'].items()))}")
    log(f"times: transformers {t_hf:.1f} s, front end + encoder graphs {t_enc:.1f} s, decoder graphs {t_dec:.1f} s")
    if failures:
        log("whisper_check: FAILED: " + "; ".join(failures))
        return 1
    log("whisper_check: PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
