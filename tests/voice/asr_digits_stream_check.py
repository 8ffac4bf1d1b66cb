"""asr_digits_stream (the trained cache-aware streaming recognizer) served by sluice-server: every held-out clip
once through Riva StreamingRecognize (the stream engine: each audio chunk computed once) and once through Recognize
(the offline bucket graphs, the same chunking over the whole clip), with the unmodified nvidia-riva-client.

Checks, per group of the held-out set (asr_digits_heldout.py: `heldout`, `shifted`):
  - the offline WER is at most --max-wer on `heldout` and --max-shifted-wer on `shifted` (the model is trained: a
    broken graph or stream transcribes nothing right);
  - the streamed WER is within --max-wer-gap (absolute) of the offline WER (issue 28: within 2 points);
  - the streamed transcript (its final results joined) equals the offline one on all but --max-differing of the
    clips: the two paths compute the same frames, only float rounding (another batch shape) can flip an argmax;
  - every stream ends with a final result covering its whole audio;
  - compute per audio second of the streaming API (/metrics) is at most 1.3 (each chunk computed once).
Streams run 8 at a time, 100 ms chunks sent as fast as gRPC flow control lets them (not paced at real time: the
check is about transcripts, and pacing would make it take minutes).

  asr_digits_stream_check.py --grpc HOST:PORT --http HOST:PORT --heldout DIR --max-wer W --max-shifted-wer S
      --max-wer-gap G
Exit 0: every check holds; 1: a check failed (printed); numbers are printed either way.
"""
import argparse
import concurrent.futures
import os
import re
import sys
import urllib.request
import wave

import riva.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wer  # noqa: E402

MODEL = "asr_digits_stream"
CHUNK_FRAMES = 1600  # 100 ms at 16 kHz


def config() -> riva.client.RecognitionConfig:
    return riva.client.RecognitionConfig(
        encoding=riva.client.AudioEncoding.LINEAR_PCM, sample_rate_hertz=16000, audio_channel_count=1,
        language_code="en-US", max_alternatives=1, model=MODEL)


def clips(heldout: str):
    """(group, wav path, reference) for every clip, in file order."""
    out = []
    for group in ("heldout", "shifted"):
        folder = os.path.join(heldout, group)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".wav"):
                path = os.path.join(folder, name)
                with open(path[:-4] + ".txt") as f:
                    out.append((group, path, f.read().strip()))
    return out


def seconds(path: str) -> float:
    with wave.open(path, "rb") as w:
        return w.getnframes() / w.getframerate()


def offline(asr, path: str) -> str:
    with open(path, "rb") as f:
        response = asr.offline_recognize(f.read(), config())
    return " ".join(r.alternatives[0].transcript.strip() for r in response.results if r.alternatives).strip()


def streamed(asr, path: str):
    """(final results joined, audio_processed of the last final)."""
    chunks = riva.client.AudioChunkFileIterator(path, CHUNK_FRAMES)
    streaming = riva.client.StreamingRecognitionConfig(config=config(), interim_results=False)
    finals, covered = [], 0.0
    for response in asr.streaming_response_generator(audio_chunks=chunks, streaming_config=streaming):
        for result in response.results:
            if result.is_final:
                if result.alternatives:
                    finals.append(result.alternatives[0].transcript.strip())
                covered = result.audio_processed
    return " ".join(t for t in finals if t), covered


def compute_per_audio_second(http: str) -> float:
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as r:
        text = r.read().decode()
    pattern = r'^sluice_voice_compute_per_audio_second\{[^}]*api="streaming"[^}]*model="' + MODEL + r'"[^}]*\} (\S+)$'
    found = re.search(pattern, text, re.M)
    if found is None:
        pattern = r'^sluice_voice_compute_per_audio_second\{[^}]*model="' + MODEL + r'"[^}]*api="streaming"[^}]*\} (\S+)$'
        found = re.search(pattern, text, re.M)
    if found is None:
        raise AssertionError("no sluice_voice_compute_per_audio_second{api=\"streaming\"} series for " + MODEL)
    return float(found.group(1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grpc", required=True)
    p.add_argument("--http", required=True)
    p.add_argument("--heldout", required=True)
    p.add_argument("--max-wer", type=float, required=True, help="bound on the `heldout` group's offline WER")
    p.add_argument("--max-shifted-wer", type=float, required=True, help="bound on the `shifted` group's offline WER")
    p.add_argument("--max-wer-gap", type=float, required=True, help="bound on |streamed WER - offline WER|")
    p.add_argument("--max-differing", type=float, default=0.02, help="share of clips whose texts may differ")
    args = p.parse_args()
    asr = riva.client.ASRService(riva.client.Auth(uri=args.grpc))
    items = clips(args.heldout)
    if not items:
        print(f"no clips under {args.heldout}", file=sys.stderr)
        return 1
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        offline_texts = list(pool.map(lambda item: offline(asr, item[1]), items))
        streamed_results = list(pool.map(lambda item: streamed(asr, item[1]), items))

    ok = True

    def check(condition: bool, message: str) -> None:
        nonlocal ok
        print(("  ok: " if condition else "  FAILED: ") + message)
        ok = ok and condition

    differing = []
    for (group, path, _), off, (text, covered) in zip(items, offline_texts, streamed_results):
        if abs(covered - seconds(path)) > 0.01:
            check(False, f"{path}: the last final result covers {covered:.3f} s of {seconds(path):.3f} s")
        if wer.normalize(off) != wer.normalize(text):
            differing.append((path, off, text))
    for path, off, text in differing[:10]:
        print(f"  differs: {os.path.basename(path)}: offline {off!r} streamed {text!r}")
    for group in ("heldout", "shifted"):
        rows = [(item[2], off, st[0]) for item, off, st in zip(items, offline_texts, streamed_results)
                if item[0] == group]
        off_wer, off_errors, words = wer.corpus_wer((ref, off) for ref, off, _ in rows)
        st_wer, st_errors, _ = wer.corpus_wer((ref, st) for ref, _, st in rows)
        print(f"{group}: {len(rows)} clips, {words} words: offline WER {off_wer:.4f} ({off_errors} errors), "
              f"streamed WER {st_wer:.4f} ({st_errors} errors)")
        bound = args.max_wer if group == "heldout" else args.max_shifted_wer
        check(off_wer <= bound, f"{group}: offline WER {off_wer:.4f} <= {bound}")
        check(abs(st_wer - off_wer) <= args.max_wer_gap,
              f"{group}: |streamed - offline| = {abs(st_wer - off_wer):.4f} <= {args.max_wer_gap}")
    check(len(differing) <= args.max_differing * len(items),
          f"{len(differing)} of {len(items)} streamed transcripts differ from offline (at most "
          f"{args.max_differing:.0%})")
    ratio = compute_per_audio_second(args.http)
    check(ratio <= 1.3, f"compute per audio second (streaming) {ratio:.3f} <= 1.3")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
