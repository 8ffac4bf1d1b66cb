#!/usr/bin/python3
"""backend/compile/ct2_model_file.py and ct2_whisper_to_hf.py on small synthetic CTranslate2 files (Debian's python3,
numpy and torch; no PyPI): a tiny WhisperSpec model.bin written here from the format's description (ct2_model_file's
docstring), read back exactly (float16, float32, int8/int16 scalars, an alias, split into two parts), converted into
transformers' names that load strictly into whisper.py's Whisper with the fused q/k/v rows where they belong; and
every malformed or foreign input refused with an error naming what is wrong.

  /usr/bin/python3 tests/voice/ct2_whisper_convert_test.py
"""
import os
import struct
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backend", "compile"))
import ct2_model_file  # noqa: E402
import ct2_whisper_to_hf as conv  # noqa: E402
import whisper  # noqa: E402

D, FFN, HEADS, MELS, VOCAB, SRC, TGT, LAYERS = 8, 16, 2, 4, 11, 6, 5, 2
CODES = {np.float32: 0, np.int8: 1, np.int16: 2, np.int32: 3, np.float16: 4}


def spec_variables(rng):
    """The variables of a WhisperSpec with two layers per stack, as CTranslate2's converter stores them."""
    v = {}

    def w(name, *shape):
        v[name] = rng.standard_normal(shape).astype(np.float16)

    def linear(name, rows, cols, zero_k=False):
        w(f"{name}/weight", rows, cols)
        w(f"{name}/bias", rows)
        if zero_k:  # fused [q; k; v] or [k; v]: transformers' k_proj has no bias
            start = D if rows == 3 * D else 0
            v[f"{name}/bias"][start:start + D] = 0

    def norm(name):
        w(f"{name}/gamma", D)
        w(f"{name}/beta", D)

    w("encoder/conv1/weight", D, MELS, 3)
    w("encoder/conv1/bias", D)
    w("encoder/conv2/weight", D, D, 3)
    w("encoder/conv2/bias", D)
    w("encoder/position_encodings/encodings", SRC, D)
    norm("encoder/layer_norm")
    v["encoder/num_heads"] = np.array(HEADS, dtype=np.int16)
    for i in range(LAYERS):
        e = f"encoder/layer_{i}"
        norm(f"{e}/self_attention/layer_norm")
        linear(f"{e}/self_attention/linear_0", 3 * D, D, zero_k=True)
        linear(f"{e}/self_attention/linear_1", D, D)
        norm(f"{e}/ffn/layer_norm")
        linear(f"{e}/ffn/linear_0", FFN, D)
        linear(f"{e}/ffn/linear_1", D, FFN)
        d = f"decoder/layer_{i}"
        norm(f"{d}/self_attention/layer_norm")
        linear(f"{d}/self_attention/linear_0", 3 * D, D, zero_k=True)
        linear(f"{d}/self_attention/linear_1", D, D)
        norm(f"{d}/attention/layer_norm")
        linear(f"{d}/attention/linear_0", D, D)
        linear(f"{d}/attention/linear_1", 2 * D, D, zero_k=True)
        linear(f"{d}/attention/linear_2", D, D)
        norm(f"{d}/ffn/layer_norm")
        linear(f"{d}/ffn/linear_0", FFN, D)
        linear(f"{d}/ffn/linear_1", D, FFN)
    w("decoder/embeddings/weight", VOCAB, D)
    w("decoder/position_encodings/encodings", TGT, D)
    norm("decoder/layer_norm")
    v["decoder/num_heads"] = np.array(HEADS, dtype=np.int16)
    for name, value in (("activation", 3), ("pre_norm", 1), ("alibi", 0), ("scale_embeddings", 0),
                        ("start_from_zero_embedding", 0)):
        v[f"decoder/{name}"] = np.array(value, dtype=np.int8)
    v["decoder/alignment_heads"] = np.array(1, dtype=np.int16)
    v["decoder/alignment_layer"] = np.array(-1, dtype=np.int16)
    return v


def _string(s: str) -> bytes:
    raw = s.encode("utf-8") + b"\0"
    return struct.pack("<H", len(raw)) + raw


def serialize(variables, aliases=None, version=6, spec="WhisperSpec", revision=3, dtype_override=None) -> bytes:
    out = [struct.pack("<I", version), _string(spec), struct.pack("<I", revision),
           struct.pack("<I", len(variables))]
    for name in sorted(variables):
        value = variables[name]
        code = CODES[value.dtype.type] if dtype_override is None or name != dtype_override[0] else dtype_override[1]
        out += [_string(name), struct.pack("<B", value.ndim)] + [struct.pack("<I", d) for d in value.shape]
        out += [struct.pack("<B", code), struct.pack("<I", value.nbytes), value.tobytes()]
    aliases = aliases if aliases is not None else {"decoder/projection/weight": "decoder/embeddings/weight"}
    out.append(struct.pack("<I", len(aliases)))
    for alias, target in aliases.items():
        out += [_string(alias), _string(target)]
    return b"".join(out)


class Ct2WhisperConvertTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.vars = spec_variables(np.random.default_rng(27))

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, data: bytes, name="model.bin") -> str:
        d = os.path.join(self.tmp.name, str(len(os.listdir(self.tmp.name))))
        os.makedirs(d)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        return d

    def refused(self, data: bytes, *fragments):
        d = self.write(data)
        with self.assertRaises((ct2_model_file.Ct2FormatError, conv.ConversionError)) as ctx:
            conv.convert_state(conv.read_ct2_variables(d))
        for fragment in fragments:
            self.assertIn(fragment, str(ctx.exception))

    def test_reads_back_exactly(self):
        d = self.write(serialize(self.vars))
        spec, rev, got, aliases = ct2_model_file.read_model(os.path.join(d, "model.bin"))
        self.assertEqual((spec, rev), ("WhisperSpec", 3))
        self.assertEqual(aliases, {"decoder/projection/weight": "decoder/embeddings/weight"})
        self.assertEqual(sorted(got), sorted(self.vars))
        for name, want in self.vars.items():
            self.assertEqual(got[name].dtype, want.dtype, name)
            np.testing.assert_array_equal(got[name], want, err_msg=name)

    def test_parts_read_as_one_file(self):
        data = serialize(self.vars)
        d = self.write(data[:len(data) // 2], "model.bin.part1")
        with open(os.path.join(d, "model.bin.part2"), "wb") as f:
            f.write(data[len(data) // 2:])
        got = conv.read_ct2_variables(d)
        np.testing.assert_array_equal(got["decoder/layer_1/ffn/linear_1/weight"],
                                      self.vars["decoder/layer_1/ffn/linear_1/weight"])

    def test_converts_into_whisper_names(self):
        state, sizes = conv.convert_state(conv.read_ct2_variables(self.write(serialize(self.vars))))
        self.assertEqual(sizes["encoder_layers"], LAYERS)
        self.assertEqual((sizes["d_model"], sizes["vocab_size"], sizes["num_mel_bins"]), (D, VOCAB, MELS))
        self.assertEqual((sizes["max_source_positions"], sizes["max_target_positions"]), (SRC, TGT))
        dims = whisper.WhisperDims(vocab_size=VOCAB, d_model=D, encoder_layers=LAYERS, decoder_layers=LAYERS,
                                   encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
                                   encoder_ffn_dim=FFN, decoder_ffn_dim=FFN, num_mel_bins=MELS,
                                   max_source_positions=SRC, max_target_positions=TGT)
        model = whisper.Whisper(dims)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
        fused = self.vars["decoder/layer_1/self_attention/linear_0/weight"].astype(np.float32)
        for part, name in enumerate("qkv"):
            np.testing.assert_array_equal(state[f"model.decoder.layers.1.self_attn.{name}_proj.weight"],
                                          fused[part * D:(part + 1) * D])
        kv = self.vars["decoder/layer_0/attention/linear_1/bias"].astype(np.float32)
        np.testing.assert_array_equal(state["model.decoder.layers.0.encoder_attn.v_proj.bias"], kv[D:])
        self.assertNotIn("model.decoder.layers.0.encoder_attn.k_proj.bias", state)
        self.assertTrue(all(v.dtype == np.float32 for v in state.values()))

    def test_refuses_other_versions_specs_and_revisions(self):
        self.refused(serialize(self.vars, version=5), "binary version 5", "only 6")
        self.refused(serialize(self.vars, spec="TransformerSpec"), "TransformerSpec", "only WhisperSpec")
        self.refused(serialize(self.vars, revision=2), "revision 2")

    def test_refuses_malformed_files(self):
        data = serialize(self.vars)
        self.refused(data[:len(data) - 7], "truncated")
        self.refused(data + b"\0\0", "2 unexpected bytes after the aliases")
        self.refused(serialize(self.vars, dtype_override=("encoder/conv1/bias", 9)),
                     "encoder/conv1/bias", "unknown dtype code 9")
        self.refused(serialize(self.vars, dtype_override=("encoder/conv1/bias", 0)),
                     "encoder/conv1/bias", "bytes, its shape needs")
        self.refused(serialize(self.vars, aliases={"decoder/projection/weight": "decoder/nothing"}),
                     "decoder/nothing", "not stored")

    def test_refuses_missing_and_unexpected_variables(self):
        v = dict(self.vars)
        del v["decoder/layer_1/ffn/linear_0/bias"]
        self.refused(serialize(v), "missing variable decoder/layer_1/ffn/linear_0/bias")
        v = dict(self.vars)
        v["encoder/layer_0/self_attention/rotary/inv_freq"] = np.ones(4, dtype=np.float32)
        self.refused(serialize(v), "unexpected variables", "encoder/layer_0/self_attention/rotary/inv_freq")
        self.refused(serialize(self.vars, aliases={}), "missing variable decoder/projection/weight")
        v = dict(self.vars)
        v["decoder/layer_2/ffn/linear_0/bias"] = np.ones(FFN, dtype=np.float16)  # a third layer, incomplete
        self.refused(serialize(v), "missing variable decoder/layer_2/")
        v = dict(self.vars)
        v["decoder/layer_3/ffn/linear_0/bias"] = np.ones(FFN, dtype=np.float16)
        self.refused(serialize(v), "decoder layers [0, 1, 3]: not 0..N-1")

    def test_refuses_what_transformers_does_not_compute(self):
        for name, value in (("decoder/pre_norm", 0), ("decoder/activation", 1), ("decoder/alibi", 1)):
            v = dict(self.vars)
            v[name] = np.array(value, dtype=np.int8)
            self.refused(serialize(v), f"{name} = {value}")
        v = dict(self.vars)
        v["encoder/layer_1/self_attention/linear_0/bias"] = v["encoder/layer_1/self_attention/linear_0/bias"] + 1
        self.refused(serialize(v), "encoder/layer_1/self_attention/linear_0", "k_proj part of the bias is not zero")
        v = dict(self.vars)
        v["decoder/projection/weight"] = v["decoder/embeddings/weight"] * 2
        self.refused(serialize(v, aliases={}), "differs from decoder/embeddings/weight")


if __name__ == "__main__":
    unittest.main(verbosity=1)
