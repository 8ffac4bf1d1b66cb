#!/usr/bin/python3
"""backend/compile/whisper_export.py --target: on a tiny random Whisper checkpoint written here (Debian's python3 and
torch; no PyPI, no Neuron SDK). --target neuron without torch_neuronx exits 2 naming it; with a stand-in
torch_neuronx module on the path (its trace() records each call and traces on the CPU) every graph goes through
torch_neuronx.trace and config.yaml asks for neuron instances; --target cpu never touches torch_neuronx. This checks
the export's routing only: nothing here says the graphs compile for, or run on, a NeuronCore.

  /usr/bin/python3 tests/voice/whisper_export_target_test.py
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch
import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXPORT = os.path.join(ROOT, "backend", "compile", "whisper_export.py")
sys.path.insert(0, os.path.join(ROOT, "backend", "compile"))
import whisper  # noqa: E402

# A stand-in for AWS's torch_neuronx: trace() appends to $FAKE_NEURON_LOG and traces on the CPU.
FAKE_TORCH_NEURONX = '''
import os
import torch

def trace(module, args):
    with open(os.environ["FAKE_NEURON_LOG"], "a") as f:
        f.write(f"{len(args)}\\n")
    return torch.jit.trace(module, args, check_trace=False)
'''

DIMS = dict(vocab_size=60, d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, num_mel_bins=80,
            max_source_positions=1500, max_target_positions=16)
GRAPHS = ["b1_l480000.pt", "prefill_l8.pt", "decode_b1_k8.pt", "decode_b1_k16.pt", "decode_b2_k8.pt",
          "decode_b2_k16.pt"]


def write_checkpoint(d: str) -> None:
    torch.manual_seed(3)
    model = whisper.Whisper(whisper.WhisperDims(**DIMS))
    torch.save(model.state_dict(), os.path.join(d, "pytorch_model.bin"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "whisper", "activation_function": "gelu", "scale_embedding": False, **DIMS}, f)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"decoder_start_token_id": 50, "eos_token_id": 51, "no_timestamps_token_id": 52,
                   "lang_to_id": {"<|en|>": 53, "<|de|>": 54}, "task_to_id": {"transcribe": 55, "translate": 56},
                   "suppress_tokens": [1, 2], "begin_suppress_tokens": [51]}, f)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        f.write("{}")  # copied, never read by the export


class WhisperExportTargetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.checkpoint = os.path.join(cls.tmp.name, "hf")
        os.makedirs(cls.checkpoint)
        write_checkpoint(cls.checkpoint)
        cls.fake = os.path.join(cls.tmp.name, "fake_neuron")
        os.makedirs(cls.fake)
        with open(os.path.join(cls.fake, "torch_neuronx.py"), "w") as f:
            f.write(FAKE_TORCH_NEURONX)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def export(self, target: str, out: str, with_fake: bool):
        env = dict(os.environ, FAKE_NEURON_LOG=os.path.join(self.tmp.name, f"{target}.log"))
        env["PYTHONPATH"] = self.fake if with_fake else ""
        cmd = [sys.executable, EXPORT, "--checkpoint", self.checkpoint, "--out", out, "--target", target,
               "--encoder-batch-sizes", "1", "--prefill-lengths", "8", "--decode-batch-sizes", "1,2",
               "--kv-lengths", "8,16", "--slots", "2"]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300), env["FAKE_NEURON_LOG"]

    def test_neuron_without_torch_neuronx_exits_2_naming_it(self):
        out = os.path.join(self.tmp.name, "refused")
        run, _ = self.export("neuron", out, with_fake=False)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn("torch_neuronx", run.stderr)
        self.assertFalse(os.path.exists(out))

    def test_neuron_traces_every_graph_with_torch_neuronx_and_asks_for_neuron_instances(self):
        out = os.path.join(self.tmp.name, "whisper_neuron")
        run, log = self.export("neuron", out, with_fake=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(log) as f:
            calls = f.read().split()
        self.assertEqual(len(calls), len(GRAPHS))
        self.assertEqual(sorted(os.listdir(os.path.join(out, "graphs"))), sorted(GRAPHS))
        with open(os.path.join(out, "config.yaml")) as f:
            text = f.read()
        config = yaml.safe_load(text)
        self.assertEqual(config["instances"], [{"count": 1, "device": "neuron", "cores": "0-1"}])
        self.assertIn("unverified on hardware", text)
        self.assertEqual(config["speech"]["recognizer"], "whisper")

    def test_cpu_never_calls_torch_neuronx(self):
        out = os.path.join(self.tmp.name, "whisper_cpu")
        run, log = self.export("cpu", out, with_fake=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertFalse(os.path.exists(log))
        with open(os.path.join(out, "config.yaml")) as f:
            config = yaml.safe_load(f)
        self.assertEqual(config["instances"], [{"count": 1, "device": "cpu", "intra_op_threads": 1}])


if __name__ == "__main__":
    unittest.main()
