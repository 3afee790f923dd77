"""Shared fixtures: the GPU gate, tolerances and value generators.

GPU tests use the ``cuda`` fixture (or the ``gpu`` marker): without a usable CUDA GPU and
CuPy they are skipped with the reason, never passed silently.
"""

import math

import pytest
import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
ALL_DTYPES = DTYPES + [torch.float64]

# Unit roundoff per dtype (half an ulp at 1.0): the matmul tests bound their error with it.
UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float64: 2.0**-53}


def _gpu_reason():
    if not torch.cuda.is_available():
        return "no CUDA GPU on this machine (torch.cuda.is_available() is False)"
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return f"CuPy not importable: {exc}"
    return None


GPU_REASON = _gpu_reason()
# The sm_90a kernels (algo="wgmma", "tf32x3", "fp16x3") run on compute capability 9.0 only.
HOPPER = GPU_REASON is None and torch.cuda.get_device_capability(0) == (9, 0)


def require_algo(algo: str) -> None:
    """Skip (with the reason) a test of a kernel family this GPU cannot run."""
    if algo in ("wgmma", "tf32x3", "fp16x3") and not HOPPER:
        pytest.skip(f"algo='{algo}' needs a Hopper GPU (compute capability 9.0)")


def pytest_collection_modifyitems(config, items):
    if GPU_REASON is None:
        return
    skip = pytest.mark.skip(reason=GPU_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _skip_reason(report) -> str:
    return str(report.longrepr[2]).removeprefix("Skipped: ") if isinstance(report.longrepr, tuple) else ""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    """Without a GPU, one line for every test skipped for that reason instead of a line per
    test file and line in the -rs list (~90 of them); other skip reasons stay listed. Wraps
    the terminal reporter's summary and gives its skips back for the final counts."""
    skipped = terminalreporter.stats.get("skipped", [])
    gpu = {id(r) for r in skipped if GPU_REASON is not None and _skip_reason(r) == GPU_REASON}
    if gpu:
        terminalreporter.stats["skipped"] = [r for r in skipped if id(r) not in gpu]
    try:
        return (yield)
    finally:
        if gpu:
            terminalreporter.stats["skipped"] = skipped
            terminalreporter.write_line(f"{len(gpu)} GPU tests skipped: {GPU_REASON}")


@pytest.fixture
def cuda():
    """The CUDA device tests run on; skips (with the reason) where there is none."""
    if GPU_REASON is not None:
        pytest.skip(GPU_REASON)
    return torch.device("cuda", 0)


def special_values(dtype, device):
    """NaN, +-inf, +-0.0, +-denormals, +-tiny, +-huge and ordinary values, in ``dtype``."""
    info = torch.finfo(dtype)
    vals = [
        math.nan,
        -math.nan,
        math.inf,
        -math.inf,
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.5,
        info.tiny,
        -info.tiny,
        info.max,
        -info.max,
        info.tiny / 4,
        -info.tiny / 4,  # denormals
        info.smallest_normal * 1.5,
        -info.smallest_normal * 1.5,
        1e-3,
        -1e-3,
        3.0e4,
        -3.0e4,
    ]
    return torch.tensor(vals, dtype=torch.float64).to(dtype).to(device)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bit patterns of ``t`` (for bit-exact comparisons that see -0.0 and NaN)."""
    view = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(view)


class OnDevice(torch.Tensor):
    """A CPU tensor that says it is a CUDA tensor on ``index`` (made by ``on_device``): what the
    launch path reads of a tensor's device, on a machine without that GPU."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    index = 0

    @property
    def is_cuda(self):
        return True

    def get_device(self):
        return self.index

    @property
    def device(self):
        return torch.device("cuda", self.index)


def on_device(index, n=8, dtype=torch.float32):
    t = torch.zeros(n, dtype=dtype).as_subclass(OnDevice)
    t.index = index
    return t


# torch's 16-bit GEMMs as ours: fp32 sums throughout (torch allows cuBLAS reduced-precision
# reductions for float16 / bfloat16 by default), so that a comparison at the dtype's tolerance
# measures the rounding of the result, not a coarser reference (usefixtures)
@pytest.fixture
def two_gpus(cuda):
    """The second CUDA device; skips (saying how many there are) on a machine with one."""
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two GPUs, this machine has {torch.cuda.device_count()}")
    return torch.device("cuda", 1)


@pytest.fixture
def full_precision_reductions():
    m = torch.backends.cuda.matmul
    before = (m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction)
    m.allow_fp16_reduced_precision_reduction = m.allow_bf16_reduced_precision_reduction = False
    yield
    m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction = before


# "torch's error order" (README's ops table): at most this many times torch's largest error
ERROR_ORDER = 4


def assert_of_torchs_error_order(got: torch.Tensor, expected: torch.Tensor, exact: torch.Tensor, what: str = ""):
    """``got`` within torch's tolerances of ``expected`` (torch's result), or else of torch's
    error order against ``exact`` (the same computed in float64): its largest error at most
    ``ERROR_ORDER`` times torch's, give or take half a unit in the last place of the largest
    value. Two GEMMs that round at other points (torch rounds each batch entry's product before
    summing a broadcast operand's gradient; we sum in fp32 and round once) or sum in another
    order (a gradient of 250 cancelling terms: 5.1e-5 against cuBLAS's 2.0e-5) may differ by
    more than the tolerance while both are as accurate as fp32 summation allows."""
    try:
        torch.testing.assert_close(got, expected)
        return
    except AssertionError as close_failure:
        if got.shape != expected.shape or got.dtype != expected.dtype or not got.dtype.is_floating_point:
            raise
        exact = exact.double()
        ours = (got.double() - exact).abs().max().item()
        theirs = (expected.double() - exact).abs().max().item()
        slack = torch.finfo(got.dtype).eps / 2 * exact.abs().max().item()
        if not ours <= ERROR_ORDER * theirs + slack:
            raise AssertionError(
                f"{what}: not of torch's error order against float64 (max error {ours:.3g}, "
                f"torch's {theirs:.3g}); {close_failure}"
            ) from None


def assert_bitwise_equal(got: torch.Tensor, expected: torch.Tensor):
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype
    if got.numel() == 0:
        return
    diff = bits(got) != bits(expected)
    if diff.any():
        i = diff.flatten().nonzero()[0].item()
        raise AssertionError(
            f"{int(diff.sum())} of {got.numel()} elements differ bitwise; first at flat index {i}: "
            f"got {got.flatten()[i].item()!r}, expected {expected.flatten()[i].item()!r}"
        )
