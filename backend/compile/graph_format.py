"""The graph format contract (backend/compile/README.md "Graph format"), shared by the exporters and every Python
tool that runs exported graphs. Only torch is needed, so any interpreter with torch can import it.

Format 2 (what the exporters write): <model>/weights.pt holds every weight once; each graph file holds code and
small constants only, and takes the weights as trailing inputs, in weights.pt's order. Format 1 (older
repositories): no weights.pt; every graph file carries its own copy of the weights.
"""
import os
from typing import List, Tuple

import torch

FORMAT_VERSION = 2
WEIGHTS_FILE = "weights.pt"


class WeightsAsInputs(torch.nn.Module):
    """Traces `module` with its parameters and buffers as graph inputs after the `n_inputs` real ones.

    The wrapped module is kept out of the submodule tree (so the traced module holds no weights), and its tensors
    are swapped for the inputs only for the duration of a call (torch's stateless.functional_call refuses to run
    under the tracer in torch 1.13).
    """

    def __init__(self, module: torch.nn.Module, names: List[str], n_inputs: int, method: str = "forward"):
        super().__init__()
        object.__setattr__(self, "_wrapped", module)
        self._names = list(names)
        self._n_inputs = n_inputs
        self._method = method  # the module's method the graph runs (a streaming model's stream_step)

    def forward(self, *args):
        saved = []
        try:
            for name, tensor in zip(self._names, args[self._n_inputs:]):
                owner_path, _, leaf = name.rpartition(".")
                owner = self._wrapped.get_submodule(owner_path) if owner_path else self._wrapped
                table = owner._parameters if leaf in owner._parameters else owner._buffers  # noqa: SLF001
                saved.append((table, leaf, table[leaf]))
                table[leaf] = tensor
            return getattr(self._wrapped, self._method)(*args[:self._n_inputs])
        finally:
            for table, leaf, tensor in reversed(saved):
                table[leaf] = tensor


def weight_tensors(module: torch.nn.Module) -> Tuple[List[str], Tuple[torch.Tensor, ...]]:
    """Every parameter and buffer of `module`, in a fixed order (parameters, then buffers, each in definition
    order): the trailing graph inputs."""
    named = [(n, t) for n, t in module.named_parameters()] + [(n, t) for n, t in module.named_buffers()]
    return [n for n, _ in named], tuple(t.detach() for _, t in named)


class _Weights(torch.nn.Module):
    def __init__(self, names: List[str], tensors):
        super().__init__()
        self.format_version = FORMAT_VERSION
        self.names = list(names)  # the original parameter names, for people and tools
        for i, tensor in enumerate(tensors):
            self.register_buffer(f"w{i}", tensor.detach().clone().contiguous())

    def forward(self) -> int:  # TorchScript wants a method; the C++ side reads attributes w0, w1, ...
        return self.format_version


def write_weights(names: List[str], tensors, path: str) -> int:
    """Writes weights.pt; returns its bytes of tensor data."""
    torch.jit.save(torch.jit.script(_Weights(names, tensors)), path)
    return sum(t.numel() * t.element_size() for t in tensors)


def read_weights(model_dir: str, map_location=None):
    """(names, tensors) of a format-2 model directory, or None for format 1 (no weights.pt)."""
    path = os.path.join(model_dir, WEIGHTS_FILE)
    if not os.path.exists(path):
        return None
    module = torch.jit.load(path, map_location=map_location)
    version = int(module.format_version)
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: graph format {version}, this tool reads format {FORMAT_VERSION}")
    names = list(module.names)
    return names, tuple(getattr(module, f"w{i}") for i in range(len(names)))


class Graph:
    """One exported graph, callable with its real inputs only (format 2: the weights are appended)."""

    def __init__(self, module, weights):
        self.module = module
        self.weights = weights

    def eval(self):
        self.module.eval()
        return self

    def __call__(self, *inputs):
        return self.module(*inputs, *self.weights)


def load_graph(model_dir: str, name: str, map_location=None, weights=None) -> Graph:
    """graphs/<name>.pt of a model directory, bound to its weights (read once: pass `weights` from read_weights
    to share one copy between graphs)."""
    if weights is None:
        weights = read_weights(model_dir, map_location)
    module = torch.jit.load(os.path.join(model_dir, "graphs", name + ".pt"), map_location=map_location)
    return Graph(module, weights[1] if weights is not None else ())
