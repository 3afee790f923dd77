"""algo="simt" (fp32 on the CUDA cores, split-K): its plan (blocks per SM, shared memory, split-K
over idle SMs) on the CPU, and its split-K on the GPU against the rounding bound."""

import pytest
import torch

import cupy_ops
from cupy_ops.ops import gemm

from gemm_checks import assert_gemm_close, linear_planned, matmul_planned
from gemm_plans import colmajor, gplan


def test_simt_split_k_fills_idle_sms():
    p = gplan(1024, 1024, 1024, epi="EpiBiasReluScale")  # 64 tiles on 132 SMs
    assert (p.slices, p.kslice, p.grid) == (2, 512, (8, 8, 2))
    assert p.kernel == "gemm_simt<true, false, EpiNone, true, 1, false>"  # partial products carry no epilogue
    assert p.reduce == "gemm_splitk_reduce<float, EpiBiasReluScale>"
    p = gplan(4096, 4096, 4096)
    assert p.slices == 1 and p.kernel == "gemm_simt<true, false, EpiNone, false, 2, true>"


def test_simt_blocks_per_sm_and_shared_memory_by_layout():
    # SIMT_OCCUPANCY: row-major a and b at 2 blocks per SM, tiles in dynamic shared memory
    # (which the launch then passes); both K-major (the nn.Linear weight) 2 blocks of static
    # tiles with the fused epilogue, 1 of dynamic without; an M-major a (a transposed view) 2
    # static with a row-major b, 2 dynamic with a K-major one, 1 static with that and the fused
    # epilogue; split-K partials 1 static
    wt = colmajor(4096, 4096)  # b = weight.T: K-major
    at = colmajor(4096, 4096)  # a = x.T: M-major
    cases = [
        (dict(), "gemm_simt<true, false, EpiNone, false, 2, true>", gemm.geometry.SIMT_SMEM_BYTES),
        (
            dict(epi="EpiBiasReluScale"),
            "gemm_simt<true, false, EpiBiasReluScale, false, 2, true>",
            gemm.geometry.SIMT_SMEM_BYTES,
        ),
        (dict(b=wt), "gemm_simt<true, true, EpiNone, false, 1, true>", gemm.geometry.SIMT_SMEM_BYTES),
        (dict(b=wt, epi="EpiBiasReluScale"), "gemm_simt<true, true, EpiBiasReluScale, false, 2, false>", 0),
        (dict(a=at), "gemm_simt<false, false, EpiNone, false, 2, false>", 0),
        (dict(a=at, epi="EpiBiasReluScale"), "gemm_simt<false, false, EpiBiasReluScale, false, 2, false>", 0),
        (dict(a=at, b=wt), "gemm_simt<false, true, EpiNone, false, 2, true>", gemm.geometry.SIMT_SMEM_BYTES),
        (dict(a=at, b=wt, epi="EpiBiasReluScale"), "gemm_simt<false, true, EpiBiasReluScale, false, 1, false>", 0),
    ]
    for kw, kernel, smem in cases:
        p = gplan(4096, 4096, 4096, **kw)
        assert (p.kernel, p.smem) == (kernel, smem), kw
    assert gemm.geometry.SIMT_SMEM_BYTES == 2 * 2 * 16 * (128 + 4) * 4  # both operands' two k-tile buffers
    p = gplan(1024, 1024, 1024)  # split-K
    assert (p.kernel, p.smem) == ("gemm_simt<true, false, EpiNone, true, 1, false>", 0)
    listed = gemm.variants()["gemm.cu"]
    assert all(kernel in listed for _, kernel, _ in cases)


@pytest.mark.parametrize("M, K, N", [(64, 4097, 33), (256, 1024, 1024), (129, 300, 250)])
def test_simt_split_k_matches_the_bound_and_is_deterministic(M, K, N, cuda):
    """The SIMT kernel's split-K (small grids: slices of K into a workspace, summed in order)
    and the unsplit kernel both stay within the rounding bound; repeated calls are identical."""
    torch.manual_seed(0)
    a, b = torch.randn(M, K, device=cuda), torch.randn(K, N, device=cuda)
    w, bias = torch.randn(N, K, device=cuda), torch.randn(N, device=cuda)
    assert cupy_ops.gemm_plan(a, b, algo="simt").slices > 1 or K < 2 * gemm.tables.SIMT_SPLIT_MIN_K
    split = cupy_ops.matmul(a, b, algo="simt")
    assert torch.equal(split, cupy_ops.matmul(a, b, algo="simt"))
    assert_gemm_close(split, a, b)
    lin = cupy_ops.linear_relu_div(a, w, bias, 2.0, algo="simt")
    assert_gemm_close(matmul_planned(a, b, algo="simt", split_k=False), a, b)
    unsplit = linear_planned(a, w, bias, 2.0, algo="simt", split_k=False)
    ref = torch.relu(a.double() @ w.double().t() + bias.double()) / 2
    tol = (
        (K + 1) * 2.0**-24 * 1.01 * (a.double().abs() @ w.double().abs().t() + bias.double().abs()) / 2
        + 2.0**-24 * ref.abs()
        + 1e-30
    )
    for got in (lin, unsplit):
        assert ((got.double() - ref).abs() <= tol).all()


@pytest.mark.parametrize(
    "a_of, b_of, K",
    [
        (lambda M, K: torch.randn(M, K), lambda K, N: torch.randn(K, N), 64),  # row-major, the eager case
        (lambda M, K: torch.randn(K, M).t(), lambda K, N: torch.randn(N, K).t(), 64),  # x.T, weight.T
        (lambda M, K: torch.randn(M, 2 * K)[:, ::2], lambda K, N: torch.randn(K, N), 64),  # a copied
        (lambda M, K: torch.randn(M, K), lambda K, N: torch.randn(K, N), 8192),  # K split
    ],
    ids=["row-major", "k-major", "a-copied", "split-k"],
)
def test_the_bound_launcher_launches_what_run_does(a_of, b_of, K, monkeypatch):
    """simt.launcher (float32 matmul's eager path): the launch ``run`` makes, the kernel bound
    once and the arguments packed once per address set (a, b, c, the epilogue's); a plan that
    copies an operand or splits K runs ``run`` itself. CPU, the driver stubbed."""
    from cupy_ops import launch
    from cupy_ops.ops.gemm import runtime, simt

    events, packs = [], []

    class Handle:
        name = "stub"

        def packed(self, *args):
            packs.append(args)
            return (args, 0)

    h = Handle()
    monkeypatch.setattr(simt, "handle", lambda kernels, expr, device: h)
    monkeypatch.setattr(runtime, "handle", lambda kernels, expr, device: h)
    monkeypatch.setattr(launch, "launch", lambda h, g, b, args, smem=0, cl=1: events.append((g, b, tuple(args), smem)))
    monkeypatch.setattr(launch, "launch_packed", lambda h, g, b, pk, smem=0, cl=1: events.append((g, b, pk[0], smem)))
    monkeypatch.setattr(simt, "reduce", lambda p, ws, c, epi: events.append("reduce"))
    M, N = 96, 80
    a, b = a_of(M, K), b_of(K, N)
    p = gplan(M, K, N, a=gemm.Matrix.of(a), b=gemm.Matrix.of(b))
    assert p.family == "simt"
    bound = p.slices == 1 and p.a.prep == "as is" and p.b.prep == "as is"
    assert bound == (K == 64 and a.stride(1) != 2)
    go = simt.launcher(p, 0)
    c0 = torch.empty(M, N)
    for c in (c0, c0, torch.empty(M, N)):  # the second call's address set seen before, the third's new
        events.clear()
        simt.run(p, a, b, c, gemm.epilogues.NO_ARGS)
        want = list(events)
        events.clear()
        go(a, b, c, gemm.epilogues.NO_ARGS)
        if bound:
            assert events == want
        else:  # run itself (a copy of a has an address of its own each call)
            assert [e if e == "reduce" else e[:2] for e in events] == [e if e == "reduce" else e[:2] for e in want]
    assert len(packs) == (2 if bound else 0)
