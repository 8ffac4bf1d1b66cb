#!/usr/bin/env python3
"""loadtest/bench/peer_triton.py: the Triton side of loadtest/bench/peer_bench.sh (issue 17): NVIDIA Triton Inference Server
(the tritonserver inside PyPI's nvidia-pytriton, pinned in loadtest/bench/peer_requirements.txt) serving sluice's
per-bucket TorchScript graphs of asr_ctc -- or an accelerator-like sim cost -- from a Python callable.

A benchmark peer, not part of sluice. Run it with the venv that peer_bench.sh makes (build-peer/venv: Debian's
/usr/bin/python3 with --system-site-packages, so Debian's python3-torch 1.13 is importable):

  build-peer/venv/bin/python loadtest/bench/peer_triton.py --mode ragged --backend cpu --model-dir build/models/asr_ctc

Modes (Triton's dynamic batcher: max batch --max-batch (8), --queue-delay-us (5000), one model instance):
  stock   stock dynamic batching: Triton batches only requests of equal shape (equal lengths); the callable pads
          each request to its bucket (the smallest bucket length >= its length) and runs that bucket's graph at the
          smallest compiled batch size that holds the rows.
  ragged  allow_ragged_batch on the input, so Triton groups requests of any length into one batch; the callable
          splits the batch by bucket and runs each group padded to its bucket and compiled batch size.
  padmax  pad-to-max: ragged batching as above, every request padded to the largest bucket (one graph shape per
          batch size). Equivalent to clients that pad to the largest bucket before sending (which would also send
          the padding over the wire; here only the real samples travel).
Backends:
  cpu     the graphs <model-dir>/graphs/b<B>_l<L>.pt, loaded with torch.jit.load and warmed twice each at full
          length (as sluice-server does), run with one intra-op thread (torch, OpenMP and OpenBLAS).
  sim     no graph: each executed batch sleeps cost(B, L) = --sim-base-ms + --sim-per-sample-us x B x L
          (B = compiled batch size, dummy rows included; L = bucket length) like sluice's sim backend, and returns
          a 1-D FP32 output of ceil(--sim-output-steps x length) steps per row.
Outputs: asr_ctc's log_probs [1, frames, 29] per request, trimmed to the graph's returned frame count.

Prints "peer_triton READY grpc=HOST:PORT http=HOST:PORT pid=PID" when the model is ready (loadtest/bench/bench_lib.sh's
start_server waits for it). SIGTERM/SIGINT stop tritonserver and exit. Listens on 127.0.0.1 only; the ports are
picked free by the OS unless given. The timings of each executed group (bucket, compiled batch, real rows,
seconds) are counted and written to --stats-file (JSON) on exit.
"""
import argparse
import collections
import json
import math
import os
import signal
import socket
import sys
import threading
import time

T0 = time.time()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mode", choices=["stock", "ragged", "padmax"], required=True)
    p.add_argument("--backend", choices=["cpu", "sim"], required=True)
    p.add_argument("--model-name", default="asr_ctc")
    p.add_argument("--model-dir", help="cpu: the model directory holding graphs/b<B>_l<L>.pt")
    p.add_argument("--lengths", default="16000,32000,64000,128000,256000", help="sim: bucket lengths")
    p.add_argument("--batch-sizes", default="1,2,4,8", help="sim: compiled batch sizes")
    p.add_argument("--sim-base-ms", type=float, default=4.0)
    p.add_argument("--sim-per-sample-us", type=float, default=0.1)
    p.add_argument("--sim-output-steps", type=float, default=0.01, help="sim: output steps per input sample")
    p.add_argument("--max-batch", type=int, default=8, help="Triton max_batch_size")
    p.add_argument("--queue-delay-us", type=int, default=5000, help="Triton max_queue_delay_microseconds")
    p.add_argument("--threads", type=int, default=1, help="cpu: intra-op threads (torch, OpenMP, OpenBLAS)")
    p.add_argument("--warmup-runs", type=int, default=2, help="cpu: runs of each graph at load")
    p.add_argument("--grpc-port", type=int, default=0)
    p.add_argument("--http-port", type=int, default=0)
    p.add_argument("--workspace", help="pytriton's workspace (model store, tritonserver copy); default a temp dir")
    p.add_argument("--stats-file", help="write per-group execution counts and seconds here (JSON) on exit")
    p.add_argument("--log-verbose", type=int, default=0)
    return p.parse_args()


ARGS = parse_args()
if ARGS.backend == "cpu":
    # Before torch loads: one thread in every pool a graph can reach (as sluice's intra_op_threads: 1).
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402  (after the thread settings)

from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor  # noqa: E402
from pytriton.model_config import generator as _generator  # noqa: E402
from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig  # noqa: E402


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# pytriton 0.7.0's Tensor has no allow_ragged_batch; add it to the generated config of the input (Triton's
# ModelInput.allow_ragged_batch: the dynamic batcher may then batch requests whose shapes differ).
if ARGS.mode in ("ragged", "padmax"):
    _get_config = _generator.ModelConfigGenerator.get_config

    def _get_config_ragged(self):
        config = _get_config(self)
        for item in config.get("input", []):
            item["allow_ragged_batch"] = True
        return config

    _generator.ModelConfigGenerator.get_config = _get_config_ragged


class Executor:
    """Runs groups of rows of one bucket: padded to (compiled batch size, bucket length)."""

    def __init__(self):
        self.stats = collections.defaultdict(lambda: [0, 0, 0.0])  # (L, B) -> [executions, real rows, seconds]
        self.calls = 0
        self.requests = 0
        if ARGS.backend == "cpu":
            self._load_graphs()
        else:
            self.lengths = sorted(int(x) for x in ARGS.lengths.split(","))
            self.batch_sizes = sorted(int(x) for x in ARGS.batch_sizes.split(","))
        if ARGS.mode == "padmax":
            self.lengths = [self.lengths[-1]]
        self.largest_batch = self.batch_sizes[-1]

    def _load_graphs(self):
        import torch  # Debian's python3-torch (the venv sees system site packages)

        torch.set_num_threads(ARGS.threads)
        torch.set_num_interop_threads(1)
        self.torch = torch
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backend", "compile"))
        import graph_format  # the graph format contract: weights.pt bound once to every graph

        weights = graph_format.read_weights(ARGS.model_dir, map_location="cpu")
        graphs_dir = os.path.join(ARGS.model_dir, "graphs")
        found = {}
        for name in os.listdir(graphs_dir):
            if name.startswith("b") and name.endswith(".pt") and "_l" in name:
                b, length = name[1:-3].split("_l")
                found[(int(length), int(b))] = os.path.join(graphs_dir, name)
        if not found:
            sys.exit(f"no graphs b<B>_l<L>.pt in {graphs_dir}")
        self.lengths = sorted({length for length, _ in found})
        self.batch_sizes = sorted({b for _, b in found})
        wanted = [(L, B) for (L, B) in sorted(found) if ARGS.mode != "padmax" or L == self.lengths[-1]]
        self.graphs = {}
        t_load = t_warm = 0.0
        for L, B in wanted:
            t = time.time()
            graph = graph_format.load_graph(ARGS.model_dir, f"b{B}_l{L}", map_location="cpu", weights=weights)
            graph.eval()
            t_load += time.time() - t
            t = time.time()
            with torch.inference_mode():
                for _ in range(ARGS.warmup_runs):
                    graph(torch.zeros(B, L), torch.full((B,), L, dtype=torch.int64))
            t_warm += time.time() - t
            self.graphs[(L, B)] = graph
        print(f"peer_triton: {len(wanted)} graphs loaded in {t_load:.2f} s, warmed ({ARGS.warmup_runs} runs each) "
              f"in {t_warm:.2f} s", flush=True)

    def bucket_of(self, n):
        for L in self.lengths:
            if n <= L:
                return L
        raise ValueError(f"length {n} exceeds the largest bucket {self.lengths[-1]}")

    def compiled_batch(self, rows):
        for b in self.batch_sizes:
            if rows <= b:
                return b
        return self.batch_sizes[-1]

    def run(self, L, rows):
        """rows: 1-D float32 arrays (each <= L). Returns one output array per row."""
        B = self.compiled_batch(len(rows))
        t = time.perf_counter()
        if ARGS.backend == "sim":
            time.sleep((ARGS.sim_base_ms + ARGS.sim_per_sample_us * B * L / 1000.0) / 1000.0)
            outs = [np.full((math.ceil(ARGS.sim_output_steps * r.shape[0]),), r.shape[0], np.float32) for r in rows]
        else:
            torch = self.torch
            x = np.zeros((B, L), np.float32)
            lengths = np.full((B,), L, np.int64)  # dummy rows: full length, as warm-up ran
            for i, r in enumerate(rows):
                x[i, : r.shape[0]] = r
                lengths[i] = r.shape[0]
            with torch.inference_mode():
                log_probs, out_lengths = self.graphs[(L, B)](torch.from_numpy(x), torch.from_numpy(lengths))
            log_probs = log_probs.numpy()
            out_lengths = out_lengths.numpy()
            outs = [log_probs[i, : int(out_lengths[i])] for i in range(len(rows))]
        s = self.stats[(L, B)]
        s[0] += 1
        s[1] += len(rows)
        s[2] += time.perf_counter() - t
        return outs

    def __call__(self, requests):
        """pytriton's callable without @batch: a list of requests (each a dict of arrays with a batch axis)."""
        self.calls += 1
        self.requests += len(requests)
        groups = collections.defaultdict(list)  # bucket -> [(request index, row index, row)]
        rows_of = []
        for qi, request in enumerate(requests):
            audio = np.asarray(request["audio"], dtype=np.float32)
            rows_of.append(audio.shape[0])
            for ri in range(audio.shape[0]):
                groups[self.bucket_of(audio.shape[1])].append((qi, ri, audio[ri]))
        results = [[None] * n for n in rows_of]
        for L, members in sorted(groups.items()):
            for start in range(0, len(members), self.largest_batch):
                chunk = members[start : start + self.largest_batch]
                for (qi, ri, _), out in zip(chunk, self.run(L, [m[2] for m in chunk])):
                    results[qi][ri] = out
        return [{"log_probs": np.stack(rows)} for rows in results]

    def dump(self, path):
        data = {
            "mode": ARGS.mode,
            "backend": ARGS.backend,
            "callable_calls": self.calls,
            "requests": self.requests,
            "groups": [
                {"length": L, "batch_size": B, "executions": n, "real_rows": rows, "seconds": round(sec, 6)}
                for (L, B), (n, rows, sec) in sorted(self.stats.items())
            ],
        }
        with open(path, "w") as f:
            json.dump(data, f, indent=1)


def main():
    executor = Executor()
    grpc_port = ARGS.grpc_port or free_port()
    http_port = ARGS.http_port or free_port()
    config = TritonConfig(
        grpc_address="127.0.0.1",
        grpc_port=grpc_port,
        http_address="127.0.0.1",
        http_port=http_port,
        allow_metrics=False,
        allow_cpu_metrics=False,
        allow_gpu_metrics=False,
        exit_timeout_secs=3,
        log_verbose=ARGS.log_verbose,
    )
    # Statistics stay open (loopback only) so that sluice-loadtest reads Triton's ModelStatistics.
    security = TritonSecurityConfig(restricted_endpoints=["shared-memory", "model-repository", "trace", "logging"])
    out_shape = (-1,) if ARGS.backend == "sim" else (-1, 29)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with Triton(config=config, workspace=ARGS.workspace, security_config=security) as triton:
        triton.bind(
            model_name=ARGS.model_name,
            infer_func=executor,
            inputs=[Tensor(name="audio", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="log_probs", dtype=np.float32, shape=out_shape)],
            config=ModelConfig(
                max_batch_size=ARGS.max_batch,
                batcher=DynamicBatcher(max_queue_delay_microseconds=ARGS.queue_delay_us),
            ),
            strict=False,
        )
        triton.run()  # starts tritonserver and loads the model; returns when it is ready
        print(f"peer_triton ready in {time.time() - T0:.2f} s (mode {ARGS.mode}, backend {ARGS.backend})", flush=True)
        print(f"peer_triton READY grpc=127.0.0.1:{grpc_port} http=127.0.0.1:{http_port} pid={os.getpid()}",
              flush=True)
        while not stop.wait(0.5):
            if not triton.is_alive():
                print("peer_triton: tritonserver or the model proxy died", file=sys.stderr, flush=True)
                break
    if ARGS.stats_file:
        executor.dump(ARGS.stats_file)
    print("peer_triton stopped", flush=True)


if __name__ == "__main__":
    main()
