"""Model-independent export machinery: per-bucket tracing, reference.pt, config.yaml, atomic model dirs.

A model module provides a ModelSpec (see asr_ctc.spec()); everything below works from the spec alone, so a
new model needs no changes here. Calling convention of every exported graph (the C++ backend relies on it):
forward(input_0, ..., input_{n-1}, lengths, weight_0, ..., weight_{m-1})
    -> tuple(outputs..., [out_lengths if any output has a -1 axis]),
the weights stored once in <model>/weights.pt (graph format 2, graph_format.py).
"""
import dataclasses
import glob
import json
import os
import random
import re
import shutil
import time
from typing import Callable, Dict, List, Optional

import torch
import yaml

import graph_format


@dataclasses.dataclass
class ModelSpec:
    name: str
    kind: str                       # speech | text | generic
    inputs: List[dict]              # config.yaml entries; shape [-1, ...]: the variable axis comes first
    outputs: List[dict]             # shape may start with -1 (variable, per-row trimmed) or be fixed
    lengths: List[int]              # length buckets, ascending
    batch_sizes: List[int]
    seed: int                       # torch.manual_seed before build(): identical weights every run
    build: Callable[[], torch.nn.Module]
    make_input: Callable[[int, torch.Generator], List[torch.Tensor]]  # one unbatched case of a length
    batching: Dict = dataclasses.field(
        default_factory=lambda: {"max_queue_delay_ms": 5, "max_queue_size": 256})
    speech: Optional[Dict] = None   # kind speech: the config's speech: section (vocabulary, frame_samples, ...)
    embedding: Optional[Dict] = None  # kind text: the config's embedding: section (tokenizer, output)
    # More graphs beside the bucket graphs (a streaming model's stream_step_b<B>.pt):
    # export_extra(model, model_dir, target, weight_names, weights), weight_names None for graph format 1.
    export_extra: Optional[Callable] = None

    @property
    def has_variable_output(self) -> bool:
        return any(-1 in o["shape"] for o in self.outputs)


def reference_lengths(bucket_lengths: List[int], count: int, seed: int) -> List[int]:
    """Deterministic case lengths: edge cases first (1, a very short one, exactly the first bucket, one
    past it, exactly the largest), then random lengths cycling through every bucket's range."""
    rng = random.Random(seed)
    first, last = bucket_lengths[0], bucket_lengths[-1]
    out = [1, rng.randint(2, max(2, first // 20)), first, min(first + 1, last), last]
    lows = [0] + bucket_lengths[:-1]
    i = 0
    while len(out) < count:
        lo, hi = lows[i % len(bucket_lengths)], bucket_lengths[i % len(bucket_lengths)]
        out.append(rng.randint(lo + 1, hi))
        i += 1
    return sorted(out[:count])


def pad_batch(cases: List[List[torch.Tensor]], length: int, fill=None):
    """Stacks unbatched cases into [B, length, ...] tensors plus int64 lengths [B].

    fill(shape, dtype) supplies the padding (default zeros); tests pass garbage to prove it is ignored.
    """
    batched = []
    for j in range(len(cases[0])):
        rows = []
        for case in cases:
            x = case[j]
            pad_shape = (length - x.shape[0],) + tuple(x.shape[1:])
            pad = fill(pad_shape, x.dtype) if fill is not None else torch.zeros(pad_shape, dtype=x.dtype)
            rows.append(torch.cat([x, pad.to(x.dtype)], dim=0))
        batched.append(torch.stack(rows))
    lengths = torch.tensor([case[0].shape[0] for case in cases], dtype=torch.int64)
    return batched, lengths


def trace_graph(model: torch.nn.Module, example: tuple, target: str, names, weights):
    """One static-shape graph of `model` at `example`'s shapes, taking `weights` (named `names`, all of the
    model's parameters and buffers) as trailing inputs rather than holding a copy of its own. names=None: graph
    format 1, the weights inlined (only to test that old repositories keep loading)."""
    if names is None:
        wrapper, args = model, tuple(example)
    else:
        wrapper = graph_format.WeightsAsInputs(model, names, len(example)).eval()
        args = tuple(example) + tuple(weights)
    if target == "neuron":
        # UNVERIFIED (no Neuron hardware here): the weights become NEFF inputs rather than inlined constants.
        import torch_neuronx  # availability checked up front by export_models.py
        return torch_neuronx.trace(wrapper, args)
    # check_trace off: it re-runs the model (doubling export time); check_padding.py is the real check.
    traced = torch.jit.trace(wrapper, args, check_trace=False)
    return torch.jit.freeze(traced)


class _Reference(torch.nn.Module):
    def __init__(self, tensors: Dict[str, torch.Tensor]):
        super().__init__()
        for name, value in tensors.items():
            self.register_buffer(name, value)

    def forward(self) -> torch.Tensor:  # TorchScript wants a method; the C++ side reads named_buffers()
        return self.case_count


def run_single(model: torch.nn.Module, spec: ModelSpec, case: List[torch.Tensor]) -> List[torch.Tensor]:
    """Eager, batch 1, unpadded; returns the declared outputs unbatched and trimmed to their real length."""
    length = torch.tensor([case[0].shape[0]], dtype=torch.int64)
    with torch.no_grad():
        result = model(*[x.unsqueeze(0) for x in case], length)
    outs = []
    for j, decl in enumerate(spec.outputs):
        out = result[j][0]
        if decl["shape"][0] == -1:
            out_len = int(result[len(spec.outputs)][0])
            # Alone and unpadded, a row's valid extent must be the whole output (no phantom frames).
            assert out_len == out.shape[0], f"{spec.name}: out_len {out_len} != extent {out.shape[0]}"
            out = out[:out_len]
        outs.append(out.clone())
    return outs


def write_reference(model, spec: ModelSpec, count: int, path: str):
    gen = torch.Generator().manual_seed(spec.seed + 1)
    tensors = {}
    for k, length in enumerate(reference_lengths(spec.lengths, count, spec.seed)):
        case = spec.make_input(length, gen)
        for j, x in enumerate(case):
            tensors[f"case{k}_input{j}"] = x.clone()
        for j, y in enumerate(run_single(model, spec, case)):
            tensors[f"case{k}_output{j}"] = y
    tensors["case_count"] = torch.tensor(count, dtype=torch.int64)
    torch.jit.save(torch.jit.script(_Reference(tensors)), path)


def _flow(value) -> str:
    """YAML flow-style scalar/list/map, e.g. {name: audio, shape: [-1]}."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return value if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", value) else json.dumps(value)


def config_yaml(spec: ModelSpec, target: str) -> str:
    if target == "neuron":
        instances = [{"count": 1, "device": "neuron", "cores": "0-1"}]
    else:
        instances = [{"count": 1, "device": "cpu", "intra_op_threads": 1}]
    doc = {"name": spec.name, "kind": spec.kind, "inputs": spec.inputs, "outputs": spec.outputs,
           "buckets": {"lengths": spec.lengths, "batch_sizes": spec.batch_sizes},
           "batching": spec.batching, "instances": instances}
    if spec.speech is not None:
        doc["speech"] = spec.speech
    if spec.embedding is not None:
        doc["embedding"] = spec.embedding
    lines = [f"# Generated by backend/compile/export_models.py --target {target}; re-run it rather than edit.",
             f"name: {_flow(spec.name)}", f"kind: {_flow(spec.kind)}", "inputs:"]
    lines += [f"  - {_flow(i)}" for i in spec.inputs]
    lines.append("outputs:")
    lines += [f"  - {_flow(o)}" for o in spec.outputs]
    lines.append(f"buckets: {_flow(doc['buckets'])}")
    lines.append(f"batching: {_flow(spec.batching)}")
    if target == "neuron":
        lines.append("# neuron instance settings are unverified on hardware")
    lines.append(f"instances: {_flow(instances)}")
    if spec.speech is not None:
        lines.append("speech:")
        for key, value in spec.speech.items():
            # Symbols are always quoted: a bare y, n, on or a digit would read back as another type.
            text = ("[" + ", ".join(json.dumps(v) for v in value) + "]") if key == "vocabulary" else _flow(value)
            lines.append(f"  {key}: {text}")
    if spec.embedding is not None:
        lines.append(f"embedding: {_flow(spec.embedding)}")
    text = "\n".join(lines) + "\n"
    assert yaml.safe_load(text) == doc, "config.yaml emitter disagrees with its own data"
    return text


def _example_batch(spec: ModelSpec, batch: int, length: int):
    """Trace inputs: rows of different lengths (the values do not shape the graph; nothing branches on them)."""
    gen = torch.Generator().manual_seed(spec.seed + 2)
    cases = [spec.make_input(max(1, length - i * length // batch), gen) for i in range(batch)]
    inputs, lengths = pad_batch(cases, length)
    return tuple(inputs) + (lengths,)


def _pid_alive(pid: str) -> bool:
    """Whether the exporter that owns a temp dir still runs (so a concurrent export is left alone)."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def export_model(spec: ModelSpec, out_dir: str, target: str, reference_cases: int,
                 graph_format_version: int = graph_format.FORMAT_VERSION) -> float:
    """Builds DIR/<name>/ in a temp dir, then renames it into place. Returns seconds taken. graph_format_version 1
    writes the old layout (every graph with its own weights, no weights.pt), for compatibility tests only."""
    start = time.monotonic()
    final = os.path.join(out_dir, spec.name)
    tmp = os.path.join(out_dir, f".{spec.name}.tmp-{os.getpid()}")
    old = os.path.join(out_dir, f".{spec.name}.old-{os.getpid()}")
    for stale in glob.glob(os.path.join(out_dir, f".{spec.name}.tmp-*")) + \
            glob.glob(os.path.join(out_dir, f".{spec.name}.old-*")):
        if not _pid_alive(stale.rsplit("-", 1)[1]):
            shutil.rmtree(stale, ignore_errors=True)  # left by an interrupted earlier run
    os.makedirs(os.path.join(tmp, "graphs"))
    try:
        torch.manual_seed(spec.seed)
        model = spec.build().eval()
        print(f"[{spec.name}] {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
              f"{len(spec.batch_sizes) * len(spec.lengths)} graphs, target {target}", flush=True)
        names, weights = None, None
        if graph_format_version == graph_format.FORMAT_VERSION:
            names, weights = graph_format.weight_tensors(model)
            weight_bytes = graph_format.write_weights(names, weights, os.path.join(tmp, graph_format.WEIGHTS_FILE))
            print(f"[{spec.name}]   {graph_format.WEIGHTS_FILE:<16} {len(names)} tensors, {weight_bytes / 2**20:.1f} "
                  "MiB (stored once; every graph takes them as inputs)", flush=True)
        for b in spec.batch_sizes:
            for length in spec.lengths:
                t0 = time.monotonic()
                with torch.no_grad():
                    graph = trace_graph(model, _example_batch(spec, b, length), target, names, weights)
                path = os.path.join(tmp, "graphs", f"b{b}_l{length}.pt")
                torch.jit.save(graph, path)
                print(f"[{spec.name}]   {'b%d_l%d.pt' % (b, length):<16} {time.monotonic() - t0:6.2f} s  "
                      f"{os.path.getsize(path) / 2**20:6.1f} MiB", flush=True)
        if spec.export_extra is not None:
            with torch.no_grad():
                spec.export_extra(model, tmp, target, names, weights)
        t0 = time.monotonic()
        write_reference(model, spec, reference_cases, os.path.join(tmp, "reference.pt"))
        print(f"[{spec.name}]   reference.pt ({reference_cases} cases) {time.monotonic() - t0:6.2f} s")
        with open(os.path.join(tmp, "config.yaml"), "w") as f:
            f.write(config_yaml(spec, target))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # A directory cannot be replaced in one rename: move the old one aside first, so DIR/<name> is only
    # ever absent for an instant and never half written.
    if os.path.exists(final):
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    seconds = time.monotonic() - start
    print(f"[{spec.name}] exported in {seconds:.1f} s -> {final}", flush=True)
    return seconds
