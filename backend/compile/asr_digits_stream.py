"""Example model `asr_digits_stream`: the cache-aware streaming twin of `asr_digits` — the same vocabulary, corpus
and training recipe (asr_digits_train.py --model asr_digits_stream), the architecture of asr_ctc_stream
(asr_ctc_stream.py: causal log-mel, chunked attention with a limited left context, causal convolutions), so its
streamed transcripts and WER mean something. Weights committed in weights/asr_digits_stream.pt.

It has no lookahead past its 160 ms chunk: each frame is decided from the audio up to its chunk's end. Its offline
graphs (b<B>_l<L>) run the same chunking over the whole utterance, so streamed and offline output are equal
within float rounding (check_stream_step.py) and a streamed WER equals the offline one but for endpointing.
"""
import os

import asr_ctc
import asr_ctc_stream
import asr_digits

WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights", "asr_digits_stream.pt")
VOCAB = asr_digits.VOCAB
# Every architecture setting; the weights file records them too and build() checks they agree. A third block
# stands in for the context the chunking takes away (asr_digits has 2 over the whole utterance).
ARCH = {"d_model": 128, "heads": 4, "blocks": 3, "ff_mult": 2, "conv_kernel": 15, "chunk_frames": 4,
        "left_frames": 32}
decode_greedy = asr_digits.decode_greedy


def build_untrained() -> asr_ctc_stream.StreamingConformerCtc:
    return asr_ctc_stream.StreamingConformerCtc(**ARCH)


def build(path: str = WEIGHTS) -> asr_ctc_stream.StreamingConformerCtc:
    """The trained model from the committed weights file (fails loudly if it is missing or mismatched)."""
    return asr_digits.load_trained(build_untrained(), path, "asr_digits_stream", ARCH, "asr_digits_stream.py")


def spec():
    from common import ModelSpec  # late import: common imports nothing model-specific
    return ModelSpec(
        name="asr_digits_stream",
        kind="speech",
        inputs=[{"name": "audio", "dtype": "FP32", "shape": [-1], "sample_rate": asr_ctc.SAMPLE_RATE}],
        outputs=[{"name": "log_probs", "dtype": "FP32", "shape": [-1, len(VOCAB)]}],
        lengths=[16000, 32000, 64000, 128000],  # asr_digits' buckets (offline Recognize)
        batch_sizes=[1, 2, 4, 8],
        seed=1003,  # unused by build() (the weights are loaded), kept for reference-case generation
        build=build,
        make_input=asr_ctc.make_input,
        speech={"vocabulary": VOCAB, "blank": 0, "word_separator": " ",
                "frame_samples": asr_ctc_stream.FRAME_SAMPLES,
                "stream_step": asr_ctc_stream.stream_step_speech(ARCH)},
        export_extra=asr_ctc_stream.export_stream_graphs,
    )
