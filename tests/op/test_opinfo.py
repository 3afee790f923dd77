"""torch's own OpInfo sample inputs (``torch.testing._internal.common_methods_invocations.op_db``)
for ``matmul``, ``mm``, ``bmm``, ``nn.functional.linear`` and ``nn.functional.relu``, run through
cupy_ops beside torch on the GPU: float32 / float16 / bfloat16 / float64, forward and, where the
sample requires grad, backward; each sample also as op_db's non-contiguous copy of it
(``SampleInput.noncontiguous``). The samples come from op_db itself when the test runs, never
from a copy.

The comparison: the GEMMs within torch's tolerances for the dtype (``torch.testing.assert_close``'s
defaults, as torch's OpInfo tests compare them) or, failing that, of torch's error order against
torch's result in float64 (``conftest.assert_of_torchs_error_order``: a broadcast operand's
gradient, where torch rounds each batch entry's product before summing and we round once); relu bit
for bit. linear is compared as the fused op computes it: ``linear_relu_div(x, w, b, d)`` against
``torch.relu(F.linear(x, w, b)) / d`` with d = 2 (a power of two: the division is exact in both, so
only the GEMM's rounding differs), and ``linear_relu`` against ``torch.relu(F.linear(x, w, b))``.

op_db's module imports ``expecttest``, which torch's test dependencies have; without it the
tests skip with that reason.
"""

import functools

import pytest
import torch
import torch.nn.functional as F

import cupy_ops

from conftest import assert_bitwise_equal, assert_of_torchs_error_order

# (full_precision_reductions: torch sums 16-bit GEMMs in fp32 as ours do)
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("full_precision_reductions")]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
DIVISOR = 2.0


@functools.cache
def _op_db():
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as exc:
        pytest.skip(f"torch's op_db does not import here: {exc} (pip install expecttest)")
    return op_db


# each OpInfo name -> [(label, ours, torch's, exact)]: ours and torch's take the sample's
# (input, *args) (linear's: x, weight and maybe bias) and give the output compared
CALLS = {
    "matmul": [("matmul", lambda a, b: cupy_ops.matmul(a, b), torch.matmul, False)],
    "mm": [("matmul", lambda a, b: cupy_ops.matmul(a, b), torch.mm, False)],
    "bmm": [("matmul", lambda a, b: cupy_ops.matmul(a, b), torch.bmm, False)],
    "nn.functional.linear": [
        (
            "linear_relu_div",
            lambda x, w, b=None: cupy_ops.linear_relu_div(x, w, b, DIVISOR),
            lambda x, w, b=None: torch.relu(F.linear(x, w, b)) / DIVISOR,
            False,
        ),
        (
            "linear_relu",
            lambda x, w, b=None: cupy_ops.linear_relu(x, w, b),
            lambda x, w, b=None: torch.relu(F.linear(x, w, b)),
            False,
        ),
    ],
    "nn.functional.relu": [("relu", lambda x: cupy_ops.relu(x), torch.relu, True)],
}


def _compare(got, expected, exact: bool, what: str, reference=None):
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), what
        for i, (g, e) in enumerate(zip(got, expected)):
            _compare(g, e, exact, f"{what}[{i}]", None if reference is None else reference[i])
        return
    if expected is None:
        assert got is None, what
        return
    assert got.shape == expected.shape and got.dtype == expected.dtype, (
        f"{what}: {tuple(got.shape)} {got.dtype} against torch's {tuple(expected.shape)} {expected.dtype}"
    )
    if exact:
        assert_bitwise_equal(got, expected)
    elif reference is None:
        torch.testing.assert_close(got, expected, msg=lambda m: f"{what}: {m}")
    else:
        assert_of_torchs_error_order(got, expected, reference, what)


def _tensors(sample):
    return [t for t in (sample.input, *sample.args) if isinstance(t, torch.Tensor)]


def _float64(t):
    return t.detach().double().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t


def _run_sample(sample, ours, theirs, exact, what):
    """Forward and backward of ``ours`` against ``theirs`` (torch); the GEMMs also against torch
    in float64 (``assert_of_torchs_error_order``)."""
    args = (sample.input, *sample.args)
    got, expected = ours(*args, **sample.kwargs), theirs(*args, **sample.kwargs)
    args64 = tuple(_float64(a) for a in args)
    exact64 = None if exact else theirs(*args64, **sample.kwargs)
    _compare(got, expected, exact, f"{what} forward", exact64)
    inputs = [t for t in _tensors(sample) if t.requires_grad]
    if inputs:
        grad = torch.randn_like(expected)
        g_ours = torch.autograd.grad(got, inputs, grad, allow_unused=True)
        g_torch = torch.autograd.grad(expected, inputs, grad, allow_unused=True)
        g64 = None
        if not exact:
            inputs64 = [t for t in args64 if isinstance(t, torch.Tensor) and t.requires_grad]
            g64 = torch.autograd.grad(exact64, inputs64, grad.double(), allow_unused=True)
        _compare(g_ours, g_torch, exact, f"{what} backward", g64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(CALLS))
def test_op_db_samples(cuda, name, dtype):
    infos = [o for o in _op_db() if o.name == name]
    assert infos, f"op_db has no OpInfo named {name!r}"
    failures, count = [], 0
    for info in infos:
        if dtype not in info.supported_dtypes("cuda"):
            continue
        grad = info.supports_autograd and dtype in info.supported_backward_dtypes("cuda")
        for i, sample in enumerate(info.sample_inputs(cuda, dtype, requires_grad=grad)):
            for layout, s in (("contiguous", sample), ("non-contiguous", sample.noncontiguous())):
                for label, ours, theirs, exact in CALLS[name]:
                    what = (
                        f"{name}{'.' + info.variant_test_name if info.variant_test_name else ''} sample {i} "
                        f"({layout}; {[tuple(t.shape) for t in _tensors(s)]}) through {label}"
                    )
                    count += 1
                    try:
                        _run_sample(s, ours, theirs, exact, what)
                    except Exception as exc:  # noqa: BLE001  (every sample reported, not the first only)
                        failures.append(f"{what}: {type(exc).__name__}: {exc}")
    if not count:
        pytest.skip(f"op_db's {name} does not list {dtype} for CUDA")
    assert not failures, f"{len(failures)} of {count} sample runs differ from torch:\n" + "\n".join(failures)
