"""OpenAI's /v1/audio/transcriptions on sluice-server, driven by the unmodified `openai` client from PyPI
(client.audio.transcriptions.create), against the trained asr_digits model and its held-out clips:

1. every clip in every response_format (json, text, verbose_json with word and segment times, srt, vtt): the text
   equals the same clip's transcript through Riva Recognize (nvidia-riva-client, unmodified); srt and vtt cues are
   well formed (HH:MM:SS,mmm / HH:MM:SS.mmm, start <= end <= duration) and carry the text; verbose_json's words join
   to the text, their times ordered and inside the recording;
2. WER of the json texts against the held-out references (manifest's .txt files) at most --max-wer;
3. bad requests, each a 4xx OpenAI error object naming the problem, the server serving after each: no file, a bad
   boundary, an unknown model (404 naming asr_digits), an unknown field, word timestamps without verbose_json, a
   temperature the greedy model refuses, stream=true, raw PCM bytes as the file;
4. 16 transcriptions at once, each equal to its clip's Riva transcript;
5. a client that disconnects mid-recognition (--slow-model: 1.5 s per window) has its recognition cancelled
   (counted as code 1, CANCELLED) while the server keeps serving;
6. /metrics counts the answers under api="openai".
"""
import argparse
import concurrent.futures
import pathlib
import re
import socket
import sys
import time
import urllib.error
import urllib.request

import openai
import riva.client

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from wer import corpus_wer  # noqa: E402

MODEL = "asr_digits"
SRT_TIME = re.compile(r"^(\d{2,}):([0-5]\d):([0-5]\d),(\d{3}) --> (\d{2,}):([0-5]\d):([0-5]\d),(\d{3})$")
VTT_TIME = re.compile(r"^(\d{2,}):([0-5]\d):([0-5]\d)\.(\d{3}) --> (\d{2,}):([0-5]\d):([0-5]\d)\.(\d{3})$")


def seconds(groups) -> float:
    h, m, s, ms = (int(g) for g in groups)
    return h * 3600 + m * 60 + s + ms / 1000


def parse_cues(body: str, vtt: bool, duration: float):
    """(start, end, text) of each cue, asserting the format."""
    if vtt:
        assert body.startswith("WEBVTT\n\n"), body[:40]
        body = body[len("WEBVTT\n\n"):]
    cues = []
    for block in filter(None, body.split("\n\n")):
        lines = block.split("\n")
        if not vtt:
            assert lines[0] == str(len(cues) + 1), f"cue number {lines[0]!r}"
            lines = lines[1:]
        match = (VTT_TIME if vtt else SRT_TIME).match(lines[0])
        assert match, f"cue timing line {lines[0]!r}"
        start, end = seconds(match.groups()[:4]), seconds(match.groups()[4:])
        assert 0 <= start <= end <= duration + 0.001, (start, end, duration)
        cues.append((start, end, " ".join(lines[1:])))
    return cues


def riva_transcript(asr, wav: bytes) -> str:
    config = riva.client.RecognitionConfig(encoding=riva.client.AudioEncoding.LINEAR_PCM, max_alternatives=1,
                                           model=MODEL)
    response = asr.offline_recognize(wav, config)
    return " ".join(r.alternatives[0].transcript for r in response.results if r.alternatives)


def check_clip(client, asr, path: pathlib.Path) -> str:
    wav = path.read_bytes()
    expected = riva_transcript(asr, wav)
    create = client.audio.transcriptions.create

    text = create(model=MODEL, file=(path.name, wav, "audio/wav"), response_format="json").text
    assert text == expected, f"{path.name}: json {text!r} != Riva {expected!r}"
    plain = create(model=MODEL, file=path.open("rb"), response_format="text")
    assert isinstance(plain, str) and plain.strip() == expected, f"{path.name}: text {plain!r}"

    verbose = create(model=MODEL, file=(path.name, wav), response_format="verbose_json",
                     timestamp_granularities=["word", "segment"])
    assert verbose.text == expected and verbose.duration > 0, verbose
    words = verbose.words or []
    assert " ".join(w.word for w in words) == expected, f"{path.name}: words {words}"
    for a, b in zip(words, words[1:]):
        assert a.start <= a.end <= b.start <= b.end, (a, b)
    assert all(0 <= w.start and w.end <= verbose.duration + 0.001 for w in words), words
    segments = verbose.segments or []
    assert " ".join(s.text.strip() for s in segments) == expected, segments
    assert [s.id for s in segments] == list(range(len(segments)))

    for fmt in ("srt", "vtt"):
        body = create(model=MODEL, file=(path.name, wav), response_format=fmt)
        cues = parse_cues(body, fmt == "vtt", verbose.duration)
        assert " ".join(c[2] for c in cues) == expected, f"{path.name}: {fmt} {body!r}"
        if segments:
            assert [(round(c[0], 3), round(c[1], 3)) for c in cues] == \
                [(round(s.start, 3), round(s.end, 3)) for s in segments], (body, segments)
    return text


def raw_post(http: str, content_type: str, body: bytes):
    """(status, body) of a POST that the openai client would not send as it is."""
    request = urllib.request.Request(f"http://{http}/v1/audio/transcriptions", data=body, method="POST",
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def form(fields, boundary="b0undary") -> bytes:
    out = b""
    for name, value, filename in fields:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def check_refusals(client, http: str, wav: bytes):
    def expect_client_error(status_class, call, needle):
        try:
            call()
        except status_class as e:
            assert needle in str(e), f"{needle!r} not in {e}"
            return
        raise AssertionError(f"expected {status_class.__name__} naming {needle!r}")

    create = client.audio.transcriptions.create
    expect_client_error(openai.NotFoundError, lambda: create(model="nope", file=("a.wav", wav)), MODEL)
    expect_client_error(openai.BadRequestError,
                        lambda: create(model=MODEL, file=("a.wav", wav), extra_body={"colour": "blue"}),
                        "unknown field 'colour'")
    expect_client_error(openai.BadRequestError,
                        lambda: create(model=MODEL, file=("a.wav", wav), timestamp_granularities=["word"]),
                        "needs response_format verbose_json")
    expect_client_error(openai.BadRequestError, lambda: create(model=MODEL, file=("a.wav", wav), temperature=0.7),
                        "temperature must be 0")
    expect_client_error(openai.BadRequestError, lambda: create(model=MODEL, file=("a.pcm", wav[44:])),
                        "'file' is not a WAV")

    cases = [
        ("no file", "multipart/form-data; boundary=b0undary", form([("model", MODEL.encode(), None)]),
         "no 'file' field"),
        ("bad boundary", "multipart/form-data; boundary=b0undary",
         form([("file", wav, "a.wav")], boundary="other"), "does not occur in the body"),
        ("no boundary", "multipart/form-data", form([("file", wav, "a.wav")]), "without a boundary"),
        ("JSON body", "application/json", b'{"model": "asr_digits"}', "expected multipart/form-data"),
        ("truncated", "multipart/form-data; boundary=b0undary", form([("file", wav, "a.wav")])[:-40],
         "truncated"),
        ("stream", "multipart/form-data; boundary=b0undary",
         form([("file", wav, "a.wav"), ("stream", b"true", None)]), "'stream' is not supported"),
    ]
    for name, content_type, body, needle in cases:
        status, text = raw_post(http, content_type, body)
        assert 400 <= status < 500, f"{name}: HTTP {status} {text}"
        assert needle in text and '"error"' in text, f"{name}: {text}"
        # The server keeps serving: a good request right after each refusal.
        assert create(model=MODEL, file=("a.wav", wav)).text is not None
    print(f"refusals: 5 through the openai client, {len(cases)} raw, each a 4xx naming the problem; served after each")


def check_concurrent(client, asr, clips):
    """16 transcriptions at once (they share the decode executor and batch in the model): each its own text."""
    expected = {path.name: riva_transcript(asr, path.read_bytes()) for path in clips}
    with concurrent.futures.ThreadPoolExecutor(len(clips)) as pool:
        got = dict(pool.map(lambda p: (p.name, client.audio.transcriptions.create(
            model=MODEL, file=(p.name, p.read_bytes())).text), clips))
    assert got == expected, (got, expected)
    print(f"concurrent: {len(clips)} transcriptions at once, each equal to its Riva transcript")


def metric(http: str, pattern: str):
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as response:
        match = re.search(pattern, response.read().decode())
    return int(float(match.group(1))) if match else 0


def check_client_gone(client, http: str, slow_model: str, wav: bytes):
    """A raw request to the slow model, its socket closed while the recognition runs."""
    cancelled = rf'sluice_voice_requests_total{{api="openai",code="1",model="{slow_model}"}} (\S+)'
    before = metric(http, cancelled)
    body = form([("file", wav, "a.wav"), ("model", slow_model.encode(), None)])
    host, port = http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: {http}\r\nContent-Type: multipart/form-data; "
                  f"boundary=b0undary\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(0.4)  # decoded and queued: the 1.5 s window runs
    deadline = time.monotonic() + 10
    while metric(http, cancelled) <= before:
        assert time.monotonic() < deadline, "the disconnected client's recognition was not cancelled"
        time.sleep(0.1)
    assert client.audio.transcriptions.create(model=MODEL, file=("a.wav", wav)).text is not None
    print("client gone: its recognition cancelled (code 1 counted), the server serving")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--grpc", required=True)
    parser.add_argument("--heldout", required=True, type=pathlib.Path)
    parser.add_argument("--max-wer", required=True, type=float)
    parser.add_argument("--slow-model", required=True, help="a speech model slow enough to disconnect from")
    args = parser.parse_args()
    client = openai.OpenAI(base_url=f"http://{args.http}/v1", api_key="not-checked", max_retries=0, timeout=60)
    asr = riva.client.ASRService(riva.client.Auth(uri=args.grpc))

    clips = sorted(args.heldout.glob("*.wav"))
    assert clips, f"no clips in {args.heldout}"
    started = time.monotonic()
    pairs = []
    for path in clips:
        text = check_clip(client, asr, path)
        pairs.append((path.with_suffix(".txt").read_text().strip(), text))
    wer, errors, words = corpus_wer(pairs)
    print(f"{len(clips)} held-out clips x 5 response formats through the openai client == Riva Recognize; "
          f"WER {wer:.4f} ({errors} errors / {words} words; bound {args.max_wer}); "
          f"{time.monotonic() - started:.1f} s")
    assert wer <= args.max_wer, f"WER {wer} above {args.max_wer}"

    check_refusals(client, args.http, clips[0].read_bytes())
    check_concurrent(client, asr, clips[:16])
    check_client_gone(client, args.http, args.slow_model, clips[0].read_bytes())

    with urllib.request.urlopen(f"http://{args.http}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    ok = re.search(r'sluice_voice_requests_total\{api="openai",code="0",model="asr_digits"\} (\d+)', metrics)
    assert ok and int(ok.group(1)) >= 5 * len(clips), "the openai answers are not counted under api=\"openai\""
    print(f"metrics: {ok.group(1)} OK answers under api=\"openai\"")
    print("openai_transcriptions_check: PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
