"""GPU checks of promises docs/claims.md once listed without a test: no host sync for a GPU
divisor (nor anywhere in the eager ops), the divisor rule against torch over the 419-divisor
sweep docs/numerics.md describes (and the fp32 reciprocal rule it replaced missing many of
them), linear_relu's forward AD and vmap, and linear_relu under autocast."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import cupy_ops

from conftest import HOPPER, assert_bitwise_equal

pytestmark = pytest.mark.gpu


class no_sync:
    """torch.cuda.set_sync_debug_mode("error") for a block: any call through torch that waits
    for the GPU (``.item()``, a device-to-host copy, ...) raises."""

    def __enter__(self):
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")

    def __exit__(self, *exc):
        torch.cuda.set_sync_debug_mode("default")


def test_a_gpu_divisor_takes_no_host_sync(cuda):
    """relu_div and relu_div_ with a one-element CUDA divisor (0-dim, (1,), (1, 1), another
    dtype) read it on the GPU: no host sync (the debug mode raises at any); values torch's."""
    torch.manual_seed(0)
    x = torch.randn(1000, 33, device=cuda)
    divisors = [
        torch.tensor(0.37, device=cuda),
        torch.tensor([3.0], device=cuda),
        torch.tensor([[-2.5]], device=cuda, dtype=torch.float64),
        torch.tensor(7, device=cuda),
        torch.tensor(0.0, device=cuda),
    ]
    for d in divisors:  # warm: compiles the variants, fills the caches
        cupy_ops.relu_div(x, d)
        cupy_ops.relu_div(x.to(torch.bfloat16), d)
        if torch.result_type(x, d) == x.dtype and d.dim() <= x.dim():
            cupy_ops.relu_div_(x.clone(), d)
    x16 = x.to(torch.bfloat16)
    for d in divisors:
        in_place = torch.result_type(x, d) == x.dtype and d.dim() <= x.dim()  # else torch refuses it too
        y = x.clone()
        with no_sync():
            got = cupy_ops.relu_div(x, d)
            got16 = cupy_ops.relu_div(x16, d)
            if in_place:
                cupy_ops.relu_div_(y, d)
        assert_bitwise_equal(got, torch.relu(x) / d)
        assert_bitwise_equal(got16, torch.relu(x16) / d)
        if in_place:
            assert_bitwise_equal(y, torch.relu(x) / d)


def test_the_eager_ops_take_no_host_sync(cuda):
    """relu, relu_div with a number, matmul by every algo this GPU runs (workspaces, operand
    copies and fp16x3's split included) and linear_relu_div: no host sync once warm (what a
    CUDA graph capture needs too)."""
    torch.manual_seed(0)
    x = torch.randn(300, 260, device=cuda)
    w = torch.randn(200, 260, device=cuda)
    bias = torch.randn(200, device=cuda)
    algos = ["auto", "naive", "simt", "tc", "accurate"] + (["wgmma", "tf32x3", "fp16x3"] if HOPPER else [])
    calls = [lambda: cupy_ops.relu(x), lambda: cupy_ops.relu_div(x, 3.0), lambda: cupy_ops.relu_div(x[:, 1:], 0.1)]
    for algo in algos:
        calls += [
            lambda algo=algo: cupy_ops.matmul(x, w.t(), algo=algo),
            lambda algo=algo: cupy_ops.matmul(x[:, 1:], w[:, 1:].t().contiguous(), algo=algo),
            lambda algo=algo: cupy_ops.linear_relu_div(x, w, bias, 2.0, algo=algo),
        ]
    calls.append(lambda: cupy_ops.matmul(x[:256, :256].to(torch.bfloat16), x[:256, :256].to(torch.bfloat16)))
    warm = [c() for c in calls]
    with no_sync():
        again = [c() for c in calls]
    for a, b in zip(warm, again):
        assert torch.equal(a, b)


def test_the_divisor_rule_over_the_419_divisor_sweep(cuda):
    """docs/numerics.md's sweep: 419 divisors log-uniform in 1e-30..1e30 of both signs plus 0,
    +-inf, NaN and subnormals, every kind torch takes for a number (float, 0-dim CPU tensor) and
    a CUDA tensor: relu_div equals torch.relu(x) / d bit for bit in every dtype; the earlier
    rule, x * fp32(1 / fp32(d)), misses torch's result for many of them (126 of 419 measured)."""
    rng = np.random.default_rng(419)
    n = 419 - 7
    ds = list(np.sign(rng.uniform(-1, 1, n)) * 10.0 ** rng.uniform(-30, 30, n))
    ds += [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-40, -1e-310]
    assert len(ds) == 419
    x = torch.randn(4096, device=cuda) * 10.0 ** torch.randint(-3, 4, (4096,), device=cuda)
    missed = 0
    for d in ds:
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            xd = x.to(dtype)
            for kind in (d, torch.tensor(d, dtype=torch.float64), torch.tensor(d, device=cuda, dtype=dtype)):
                assert_bitwise_equal(cupy_ops.relu_div(xd, kind), torch.relu(xd) / kind)
        with np.errstate(all="ignore"):
            old = np.float32(1) / np.float32(d)
        a, b = torch.relu(x) * float(old), torch.relu(x) / d
        if not ((a == b) | (a.isnan() & b.isnan())).all():
            missed += 1
    assert missed >= 60, f"x * fp32(1 / fp32(d)) missed only {missed} of 419: the rule's reason is gone"


@pytest.mark.parametrize("algo", ["auto", "naive"])
def test_linear_relu_forward_ad_and_vmap_match_torch(algo, cuda):
    """cupy_ops.linear_relu (the op linear_relu_div runs as under autograd): torch.func.jvp in
    every input, vmap over a batch of x and of weights, jacfwd, against torch's
    relu(F.linear(...)) in float64."""
    torch.manual_seed(0)
    x, w, b = (torch.randn(*s, device=cuda, dtype=torch.float64) for s in ((6, 5), (4, 5), (4,)))
    t = [torch.randn_like(v) for v in (x, w, b)]
    ours = lambda x, w, b: cupy_ops.linear_relu(x, w, b, algo=algo)  # noqa: E731
    ref = lambda x, w, b: torch.relu(F.linear(x, w, b))  # noqa: E731
    (y1, dy1), (y2, dy2) = torch.func.jvp(ours, (x, w, b), tuple(t)), torch.func.jvp(ref, (x, w, b), tuple(t))
    torch.testing.assert_close(y1, y2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dy1, dy2, rtol=1e-12, atol=1e-12)
    xs, ws = (
        torch.randn(3, 6, 5, device=cuda, dtype=torch.float64),
        torch.randn(3, 4, 5, device=cuda, dtype=torch.float64),
    )
    torch.testing.assert_close(
        torch.func.vmap(ours, (0, None, None))(xs, w, b),
        torch.func.vmap(ref, (0, None, None))(xs, w, b),
        rtol=1e-12,
        atol=1e-12,
    )
    torch.testing.assert_close(
        torch.func.vmap(ours, (None, 0, None))(x, ws, b),
        torch.func.vmap(ref, (None, 0, None))(x, ws, b),
        rtol=1e-12,
        atol=1e-12,
    )
    torch.testing.assert_close(
        torch.func.jacfwd(ours)(x, w, b), torch.func.jacfwd(ref)(x, w, b), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_linear_relu_under_autocast_runs_in_the_autocast_dtype(dtype, cuda):
    """linear_relu under torch.autocast("cuda"): float32 operands cast to the autocast dtype, as
    torch's F.linear casts them; the result in that dtype, with the values of torch's
    relu(F.linear(...)) under autocast (within the GEMM's rounding); gradients flow back to the
    float32 leaves."""
    torch.manual_seed(0)
    x = torch.randn(64, 96, device=cuda, requires_grad=True)
    w = torch.randn(48, 96, device=cuda, requires_grad=True)
    b = torch.randn(48, device=cuda, requires_grad=True)
    with torch.autocast("cuda", dtype=dtype):
        ours = cupy_ops.linear_relu(x, w, b)
        ref = torch.relu(F.linear(x, w, b))
    assert ours.dtype == ref.dtype == dtype
    torch.testing.assert_close(ours.float(), ref.float(), rtol=2 * torch.finfo(dtype).eps, atol=1e-2)
    ours.float().sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.float32 and w.grad.dtype == torch.float32


def _add(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor) -> None:
    out.copy_(a + b)


def _add_output(a, b):
    return torch.empty_like(a, dtype=torch.promote_types(a.dtype, b.dtype))


POLICIES = {
    p: cupy_ops.op(f"claimsgpu::add_{p}", output=_add_output, autocast=p)(_add) for p in ("lower", "fp32", "promote")
}


def test_a_declared_ops_autocast_policy(cuda):
    """README: ``autocast="lower" | "fp32" | "promote"`` sets a declared op's policy. Under
    torch.autocast("cuda", bfloat16) with a float16 and a float32 input: "lower" runs in
    bfloat16 (as torch's matmul casts), "fp32" in float32, "promote" in the widest input dtype
    (float32; float16 with two float16 inputs); float64 is never lowered; outside autocast
    nothing is cast."""
    a = torch.randn(64, 32, device=cuda, dtype=torch.float16)
    b = torch.randn(64, 32, device=cuda, dtype=torch.float32)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got = {p: f(a, b) for p, f in POLICIES.items()}
        halves = POLICIES["promote"](a, a)
        doubles = POLICIES["lower"](b.double(), b.double())
    assert {p: t.dtype for p, t in got.items()} == {
        "lower": torch.bfloat16,
        "fp32": torch.float32,
        "promote": torch.float32,
    }
    assert halves.dtype == torch.float16 and doubles.dtype == torch.float64
    assert torch.equal(got["lower"], a.to(torch.bfloat16) + b.to(torch.bfloat16))
    assert torch.equal(got["fp32"], a.float() + b) and torch.equal(got["promote"], a.float() + b)
    assert POLICIES["lower"](a, b).dtype == torch.float32  # no autocast: the inputs' promotion
