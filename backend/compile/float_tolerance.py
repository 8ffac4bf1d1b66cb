"""How the checks compare float results of two graph shapes (or a graph and eager PyTorch).

Two shapes run different BLAS kernels -- OpenBLAS picks them per shape and per CPU (Intel, AMD,
OPENBLAS_CORETYPE) -- so their sums are rounded in another order and differ by float rounding that grows with the
magnitude of the values (llama_tiny's logits, ~30: 2.4e-5 between two prompt buckets on an AMD EPYC). The bound is
therefore scaled to the reference's largest magnitude, never fixed or exact:

    max |got - want| <= atol + rtol * max |want|

The same rule and defaults are in tests/float_tolerance.h for the C++ tests. Padding bugs give errors of the order
of the values themselves, far above this bound.
"""
import torch

RTOL = 1e-5  # ~84 float32 ulps of the largest value: several times the rounding spread seen across CPUs
ATOL = 1e-5  # floor for tensors whose values are all near zero


def bound(want, rtol: float = RTOL, atol: float = ATOL) -> float:
    """The largest difference allowed from `want` (a tensor, or a list of tensors judged together)."""
    tensors = want if isinstance(want, (list, tuple)) else [want]
    magnitude = max((float(t.abs().max()) for t in tensors if t.numel()), default=0.0)
    return atol + rtol * magnitude


def max_diff(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| (NaN when either has a NaN, so `not diff <= bound` fails on it)."""
    if not want.numel():
        return 0.0
    d = (got.double() - want.double()).abs()
    return float("nan") if torch.isnan(d).any() else float(d.max())


# Greedy decoding picks the top logit: two logits that are each off by at most bound() can only swap when their
# reference margin is below twice that bound (2 x 5e-4 for logits up to ~50). A generated sequence may therefore
# leave the reference only at a step whose reference top-2 margin is below NEAR_TIE; the rest is then not compared.
NEAR_TIE = 1e-3


def first_divergence(got, want, margins):
    """(step, ok): the first step where token lists `got` and `want` differ (None when equal), and whether that
    is allowed (a near tie by the reference's top-2 `margins`)."""
    step = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), None)
    if step is None:
        if len(got) == len(want):
            return None, True
        return min(len(got), len(want)), False
    return step, step < len(margins) and margins[step] < NEAR_TIE
