"""The pure planning functions (elementwise launch shape, the GEMM plan) and the host-side
divisor rounding: CPU logic, called directly, no globals patched."""
# --- the divisor rule, against exact arithmetic ---------------------------------------------
# torch computes t / d (d a number) as t * (1 / d), the reciprocal taken in double and rounded to
# the compute type: fp32 for float32 / float16 / bfloat16, fp64 for float64 (measured on an H200,
# docs/numerics.md#the-divisor). The reference below does not share the implementation's
# arithmetic: 1 / d is an exact Fraction, rounded to nearest even by hand into binary64 and then
# binary32, with IEEE 754's subnormals, overflow to inf, signed zeros and NaN.

import importlib.util
from pathlib import Path

import pytest
import torch

from cupy_ops.ops import gemm
from cupy_ops.ops.gemm import Matrix, tf32x3

from gemm_plans import A100, ES, H100, H200, colmajor, gplan, rowmajor

# --- the GEMM plan --------------------------------------------------------------------------


def test_auto_follows_dtype_torch_switches_and_gpu():
    assert gplan(512, 512, 512).family == "simt"  # fp32, TF32 off: full fp32
    assert gplan(512, 512, 512, tf32=True).family == "wgmma"  # TF32 allowed, Hopper
    assert gplan(512, 512, 512, tf32=True, dev=A100).family == "tc"  # elsewhere: mma.sync
    assert gplan(512, 512, 512, torch.bfloat16).family == "wgmma"
    assert gplan(512, 512, 512, torch.float16, dev=A100).family == "tc"
    assert gplan(512, 512, 512, torch.float64).family == "naive"
    assert gplan(65535 * 128 + 1, 4, 4).family == "naive"  # more row tiles than the grid holds


@pytest.mark.parametrize(
    "algo, dtype, dev, match",
    [
        ("simt", torch.float16, H100, "algo='simt' is the fp32 kernel; got torch.float16"),
        ("tc", torch.float64, H100, "algo='tc' takes float16, bfloat16 or float32"),
        ("wgmma", torch.bfloat16, A100, r"algo='wgmma' needs a Hopper GPU \(compute capability 9.0\); cuda:0 has 8.0"),
        ("tf32x3", torch.bfloat16, H100, "algo='tf32x3' is the fp32 kernel on TF32 tensor cores .*got torch.bfloat16"),
        ("tf32x3", torch.float32, A100, r"algo='tf32x3' needs a Hopper GPU .* has 8.0 \(use 'auto' or simt"),
    ],
)
def test_an_algo_that_cannot_take_the_problem_is_a_value_error(algo, dtype, dev, match):
    with pytest.raises(ValueError, match=match):
        gplan(64, 64, 64, dtype, dev=dev, algo=algo)
    with pytest.raises(ValueError, match=r"algo='simt' takes at most 8388480 rows \(M\), got 8388481"):
        gplan(65535 * 128 + 1, 4, 4, algo="simt")


@pytest.mark.parametrize("tf32", [False, True])
def test_accurate_ignores_the_tf32_switch(tf32):
    """algo="accurate" plans float32 on the fp32-accurate kernels whatever torch's TF32 switch
    says: fp16x3 or tf32x3 on Hopper by the cost model, simt elsewhere; never a TF32 product
    (wgmma / tc); 16-bit as "auto" (the tensor cores)."""
    for M, K, N, hopper in (
        (4096, 4096, 4096, "fp16x3"),
        (2048, 2048, 2048, "fp16x3"),
        (128, 32768, 32768, "tf32x3"),
        (1024, 1024, 1024, "tf32x3"),
        (3, 5, 7, "tf32x3"),
    ):
        assert gplan(M, K, N, algo="accurate", tf32=tf32).family == hopper, (M, K, N)
        assert gplan(M, K, N, algo="accurate", tf32=tf32, dev=A100).family == "simt", (M, K, N)
        assert gplan(M, K, N, algo="auto", tf32=tf32).family == ("wgmma" if tf32 else "simt")
    assert gplan(64, 64, 64, torch.bfloat16, algo="accurate", tf32=tf32).family == "wgmma"
    assert gplan(64, 64, 64, torch.bfloat16, algo="accurate", tf32=tf32, dev=A100).family == "tc"
    assert gplan(64, 64, 64, torch.float64, algo="accurate", tf32=tf32).family == "naive"


# Kernel times on an H200 (torch.profiler, summed over a call's kernels, float32 x (M, K) @ w.T +
# b through cupy_ops.linear, ceedcab), microseconds: fp16x3 (split and t passes + GEMM) and tf32x3
# (A split by a pass and C^T = W x^T where its plan says), and the faster
MEASURED_H200 = [
    ((128, 32768, 32768), 4393, 2098, "tf32x3"),
    ((128, 8192, 8192), 298, 164, "tf32x3"),
    ((1024, 1024, 1024), 52, 33, "tf32x3"),
    ((2048, 2048, 2048), 126, 152, "fp16x3"),
    ((4096, 4096, 4096), 698, 1069, "fp16x3"),
    ((1024, 8192, 8192), 782, 1073, "fp16x3"),
    ((8192, 8192, 8192), 5255, 9029, "fp16x3"),
    ((512, 4096, 4096), 175, 181, "fp16x3"),
    ((256, 8192, 8192), 337, 271, "tf32x3"),
    ((512, 8192, 8192), 469, 510, "fp16x3"),
    ((1024, 2048, 2048), 85, 78, "tf32x3"),
    ((2048, 4096, 4096), 378, 531, "fp16x3"),
    ((256, 4096, 16384), 328, 265, "tf32x3"),
    ((768, 8192, 8192), 616, 757, "fp16x3"),
    ((1024, 4096, 4096), 237, 290, "fp16x3"),
    ((512, 2048, 2048), 70, 46, "tf32x3"),
]


@pytest.mark.parametrize("shape, fp16x3_us, tf32x3_us, faster", MEASURED_H200)
def test_the_cost_model_picks_the_measured_faster_family(shape, fp16x3_us, tf32x3_us, faster):
    """The cost model's estimates (tf32x3's as its plan for a Linear's weight runs it) fall
    within 35 % of the measured kernel times on the card they were measured on, and "accurate"
    takes the family that measured faster where the two differ by more than 5 % (a small-M layer
    with a huge weight tf32x3, whose split passes would read and write the weight again; large
    square products fp16x3); B prepacked, fp16x3 wherever its GEMM alone wins."""
    M, K, N = shape
    w = colmajor(K, N)  # a Linear's weight.T
    t = gemm.planner.x3_estimates(M, N, K, H200, swap=True)
    assert 0.65 < t["fp16x3"] / fp16x3_us < 1.35 and 0.65 < t["tf32x3"] / tf32x3_us < 1.35, t
    if abs(fp16x3_us - tf32x3_us) > 0.05 * min(fp16x3_us, tf32x3_us):
        assert gemm.fp32_accurate(M, N, K, H200, swap=True) == faster
        assert gplan(M, K, N, b=w, algo="accurate", dev=H200).family == faster
    packed = gemm.planner.x3_estimates(M, N, K, H200, b_packed=True, swap=True)["fp16x3"]
    takes = gemm.fp32_accurate(M, N, K, H200, b_packed=True, swap=True)
    assert packed < t["fp16x3"] and takes == ("fp16x3" if packed < t["tf32x3"] else "tf32x3")


def test_the_cost_model_reads_the_cards_bandwidth():
    """A card with less memory bandwidth pays more for fp16x3's split passes and tf32x3's A
    split by a pass: the estimates grow with 1 / bandwidth, the main loops' rates do not (an
    unknown bandwidth is an H100's)."""
    t100, t200 = (gemm.planner.x3_estimates(1024, 8192, 8192, d) for d in (H100, H200))
    assert t100["fp16x3"] > t200["fp16x3"] and t100["tf32x3"] > t200["tf32x3"]
    plain = [gemm.planner.x3_estimates(1024, 8192, 8192, d, presplit=False)["tf32x3"] for d in (H100, H200)]
    assert plain[0] == plain[1] > t100["tf32x3"]
    assert gemm.planner.x3_estimates(1024, 8192, 8192, gemm.Device(0, 132, (9, 0))) == t100
    # the M = 128 layer reads its 4 GB weight: bounded by the bandwidth, not the rate, on an H100
    assert gemm.planner.x3_estimates(128, 32768, 32768, H100, b_packed=True)["fp16x3"] > (
        128 * 32768 * 32768 / gemm.tables.X3_MACS_PER_US["fp16x3"]
    )


@pytest.mark.parametrize(
    "M, K, N", [(1, 8, 1), (128, 32768, 32768), (4096, 4096, 4096), (33, 4097, 65), (8192, 64, 8192)]
)
def test_the_estimates_grow_with_each_dimension_and_prepacking_only_saves(M, K, N):
    """More work never costs less, in any dimension; a prepacked B only saves (fp16x3's
    estimate falls); tf32x3's estimate does not depend on prepacking."""
    for dev in (H100, H200):
        t = gemm.planner.x3_estimates(M, N, K, dev)
        for bigger in ((2 * M, K, N), (M, 2 * K, N), (M, K, 2 * N)):
            t2 = gemm.planner.x3_estimates(bigger[0], bigger[2], bigger[1], dev)
            assert all(t2[f] >= t[f] for f in t), (bigger, t, t2)
        p = gemm.planner.x3_estimates(M, N, K, dev, b_packed=True)
        assert p["tf32x3"] == t["tf32x3"] and p["fp16x3"] < t["fp16x3"]


# tf32x3 kernel times on an H200 (CUDA events, L2 flushed, in one process, float32 x (M, K) @
# w.T, K-major, or @ a row-major (K, N)), microseconds: A split in the kernel, and by a pass first
# (the pass included), the kernel then computing C^T = B^T A^T (A the kernel's B side) or, the
# swap=False override, C; and the most the cost model may overestimate the saving by (the
# unswapped K-major M = 128 layer saves half the estimate: its 4 GB weight streams through the
# pass's shallower ring, 3 stages to 5). Unswapped and row-major rows: aba4d47 and 9e2f9ac;
# K-major swapped rows: gemm_tf32x3_swap_pre<128, true, ...>, the kernel time of docs/gemm.md#tf32x3.
MEASURED_PRESPLIT_H200 = [
    ((128, 32768, 32768), "k", False, 2738.8, 2585.0, 2.2),
    ((128, 8192, 8192), "k", False, 207.6, 190.2, 1.3),
    ((512, 4096, 4096), "k", False, 195.0, 178.8, 1.3),
    ((1024, 8192, 8192), "k", False, 1491.6, 1333.2, 1.3),
    ((4096, 4096, 4096), "k", False, 1469.9, 1349.8, 1.3),
    ((8192, 8192, 8192), "k", False, 12076.3, 11025.1, 1.3),
    ((2048, 2048, 2048), "k", False, 192.0, 185.2, 1.3),
    ((1024, 1024, 1024), "k", False, 44.0, 46.6, 1.3),
    ((4096, 4096, 1024), "k", False, 390.4, 393.4, 1.3),
    ((128, 32768, 32768), "row", True, 3013.4, 2126.3, 1.3),
    ((128, 8192, 8192), "row", True, 205.8, 158.9, 1.3),
    ((512, 4096, 4096), "row", True, 201.2, 149.8, 1.3),
    ((1024, 8192, 8192), "row", True, 1474.8, 1054.6, 1.3),
    ((4096, 4096, 4096), "row", True, 1512.7, 1132.6, 1.3),
    ((256, 4096, 16384), "row", True, 360.0, 265.2, 1.3),
    ((2048, 2048, 2048), "row", True, 186.1, 153.4, 1.3),
    ((4096, 4096, 1024), "row", True, 357.6, 309.8, 1.3),
    ((1024, 1024, 1024), "row", True, 40.0, 38.0, 1.3),
    ((128, 32768, 32768), "k", True, 2887.9, 2175.3, 1.3),
    ((128, 8192, 8192), "k", True, 206.3, 155.4, 1.3),
    ((512, 4096, 4096), "k", True, 181.8, 140.7, 1.3),
    ((1024, 8192, 8192), "k", True, 1508.1, 1063.6, 1.3),
    ((4096, 4096, 4096), "k", True, 1496.4, 1095.4, 1.3),
    ((8192, 8192, 8192), "k", True, 13116.3, 9687.1, 1.3),
    ((256, 4096, 16384), "k", True, 355.9, 266.7, 1.3),
    ((2048, 2048, 2048), "k", True, 184.5, 150.5, 1.3),
    ((4096, 4096, 1024), "k", True, 351.3, 308.4, 1.3),
    ((1024, 1024, 1024), "k", True, 35.8, 35.6, 1.3),
]


@pytest.mark.parametrize("shape, layout, swap, registers_us, presplit_us, over", MEASURED_PRESPLIT_H200)
def test_tf32x3_splits_a_by_a_pass_where_that_measured_faster(shape, layout, swap, registers_us, presplit_us, over):
    """Where the output has many column tiles (each CTA of a column splitting the same A rows
    again) the cost model splits A by a pass first, where few it splits in the kernel: as
    measured where either is more than 5 % faster, for a K-major b and a row-major one, swapped
    (C^T = B^T A^T, as planned) and, K-major, unswapped (swap=False); the estimate of the kernel it
    plans within 15 % of its time (from 100 us), its saving's 0.6x (the swapped kernel splitting
    in the kernel runs ~5 % slower than the table's rate for both) to ``over`` the measured.
    presplit=True / False force it either way; "accurate" counts the saving unless told not to."""
    M, K, N = shape
    b = rowmajor(K, N) if layout == "row" else colmajor(K, N)
    ov = {} if swap else {"swap": False}
    saves = tf32x3.presplit_saves(M, N, K, H200, swap)
    measured = registers_us - presplit_us
    if abs(measured) > 0.05 * registers_us:  # (nearer, either is a tie)
        assert (saves > 0) == (measured > 0)
    if measured > 0.05 * registers_us:
        assert 0.6 < saves / measured < over, (saves, measured)
    planned = gemm.planner.x3_estimates(M, N, K, H200, swap=swap)["tf32x3"]
    if planned > 100:
        assert 0.85 < planned / (presplit_us if saves > 0 else registers_us) < 1.15, planned
    p = gplan(M, K, N, b=b, algo="tf32x3", dev=H200, **ov)
    assert p.presplit == (saves > 0) and p.swap == (swap and (layout == "row" or p.presplit))
    swapped = "gemm_tf32x3_swap_pre<128, " + ("false" if layout == "row" else "true")
    kernel = swapped if layout == "row" or swap else "gemm_tf32x3_pre<"
    assert p.kernel.replace("_partial", "").startswith(kernel) == p.presplit, p
    assert ("A split by a pass first" in str(p)) == p.presplit
    assert not gplan(M, K, N, b=b, algo="tf32x3", dev=H200, presplit=False, **ov).presplit
    forced = gplan(M, K, N, b=b, algo="tf32x3", dev=H200, presplit=True, **ov)
    assert forced.presplit and forced.slices == p.slices and forced.kernel.replace("_partial", "").startswith(kernel)
    assert forced.grid == p.grid or (layout, swap, p.presplit) == ("k", True, False)  # (C^T's grid: C's transposed)
    plain = gemm.planner.x3_estimates(M, N, K, H200, presplit=False, swap=swap)["tf32x3"]
    assert gemm.planner.x3_estimates(M, N, K, H200, swap=swap)["tf32x3"] == plain - max(saves, 0.0)


def test_an_accurate_plan_names_the_estimates_it_chose_by():
    """gemm_plan's line for "accurate" carries both estimates; a family by name, none."""
    p = gplan(128, 32768, 32768, algo="accurate")
    assert p.family == "tf32x3" and "accurate: the cost model's tf32x3 ~2,200 us, fp16x3 ~6,251 us" in str(p)
    assert "cost model" not in str(gplan(128, 32768, 32768, algo="tf32x3"))
    assert "cost model" not in str(gplan(64, 64, 64, torch.bfloat16, algo="accurate"))


def test_a_prepacked_b_plans_fp16x3_over_its_pieces():
    """b_packed (a prepacked weight, docs/prepack.md): "accurate" weighs fp16x3 without B's split
    (the M = 128 layer then takes it), and fp16x3's plan reads B's K-major pieces whatever b's
    layout, splitting only A; other families ignore it."""
    w = rowmajor(32768, 32768)
    p = gplan(128, 32768, 32768, b=w.T, algo="accurate", b_packed=True)
    assert (p.family, p.kernel) == ("fp16x3", "gemm_fp16x3<128, EpiNone, false>")
    assert p.b == gemm.Operand("prepacked", True, 32768)
    assert "A's only (fp16x3_split); B's pieces prepacked" in str(p) and "fp16x3 ~1,643 us" in str(p)
    p = gplan(4096, 4094, 4096, algo="fp16x3", b_packed=True)  # a row-major b, rows padded to 16 bytes
    assert p.b == gemm.Operand("prepacked", True, 4096) and p.kernel.endswith("false>")
    assert gplan(1024, 1024, 1024, algo="accurate", b_packed=True).family == "tf32x3"
    assert gplan(64, 64, 64, torch.bfloat16, b_packed=True).family == "wgmma"


def test_every_kernel_a_plan_names_is_registered():
    registered = {f: set(v) for f, v in gemm.variants().items()}

    def layouts(r, c, dt):
        return [
            rowmajor(r, c, dt),
            colmajor(r, c, dt),
            Matrix(r, c, 3 * c, 3, ES[dt], True),
            rowmajor(r, c, dt, aligned=False),
        ]

    seen = set()
    for dev in (H100, A100):
        for dtype in ES:
            for algo in gemm.ALGOS:
                for M, K, N in [(1, 1, 1), (64, 0, 64), (256, 1024, 1024), (4096, 4096, 4096), (129, 3000, 130)]:
                    for a in layouts(M, K, dtype):
                        for b in layouts(K, N, dtype):
                            for epi in gemm.EPILOGUES:
                                for tf32 in (False, True):
                                    try:
                                        p = gemm.plan(M, N, K, dtype, a, b, epi, dev, algo=algo, tf32=tf32)
                                    except ValueError:
                                        continue
                                    assert p.kernel in registered[p.source], p
                                    assert p.reduce is None or p.reduce in registered["gemm.cu"], p
                                    seen.add(p.kernel)
    assert len(seen) >= 40  # the sweep reaches most variants


def test_a_layer_signature_is_checked_once_and_anything_it_reads_makes_a_new_one(monkeypatch):
    """``gemm.layer``: a call whose signature was seen runs no check; a new shape, stride,
    dtype, 16-byte alignment of x or the weight, bias layout, epilogue, algo, TF32 switch or
    caller's ``extra`` is checked anew. The general path takes: a prepacked weight, rows that
    are no view of x, a bias with a stride, K = 0, the caller's refusal (``part`` None). CPU
    tensors, the launcher stubbed."""
    from cupy_ops.ops.gemm import packed, planner

    monkeypatch.setattr(planner, "launcher_for", lambda a, b, e, algo: ("launcher", a.shape, b.shape, e, algo))
    planner.clear()
    checked = []

    def layer(x, w, b=None, epi="EpiNone", algo="auto", extra=(), part=()):
        def check():
            checked.append(1)
            return tuple(x.shape[:-1]) + (w.shape[0],), part

        return planner.layer(x, w, b, epi, algo, extra, check)

    x, w, b = torch.randn(6, 8), torch.randn(5, 8), torch.randn(5)
    e = layer(x, w, b)
    assert e[:4] == ((6, 5), x.device, 6, False) and e[4] == ("launcher", (6, 8), (8, 5), "EpiNone", "auto")
    assert layer(torch.randn(6, 8), torch.randn(5, 8), torch.randn(5)) is e and len(checked) == 1
    e3 = layer(x.view(2, 3, 8), w, b)  # rows folded by a view
    assert e3[:4] == ((2, 3, 5), x.device, 6, True) and len(checked) == 2
    new = [
        (torch.randn(7, 8), w, b),
        (torch.randn(8, 6).t(), w, b),
        (x.double(), w.double(), b.double()),
        (torch.randn(6 * 8 + 1)[1:].view(6, 8), w, b),  # x 4 bytes off its alignment
        (x, torch.randn(5, 9)[:, :8], b),
        (x, w, None),
    ]
    for args in new:
        n = len(checked)
        layer(*args)
        layer(*args)
        assert len(checked) == n + 1, args[0].shape
    for kw in (dict(epi="EpiBiasReluScale"), dict(algo="simt"), dict(extra=("t",))):
        n = len(checked)
        assert layer(x, w, b, **kw) is not None and layer(x, w, b, **kw) is not None and len(checked) == n + 1, kw
    monkeypatch.setattr(planner, "tf32_allowed", lambda: True)
    n = len(checked)
    layer(x, w, b)
    assert len(checked) == n + 1
    assert layer(x, w, b, algo=["auto"]) is None  # unhashable: the general path (which raises)
    assert layer(x, w, torch.randn(10)[::2]) is None  # a bias with a stride
    assert layer(torch.randn(4, 6, 8).transpose(0, 1), w, b) is None  # rows no view of x
    assert layer(torch.randn(6, 0), torch.randn(5, 0), b) is None  # K = 0
    assert layer(x, w, b, extra=("no",), part=None) is None  # the caller's refusal
    n = len(checked)
    assert layer(x.to_sparse(), w, b) is None and layer(x, w.to_sparse_csr(), b) is None  # no strides
    assert len(checked) == n  # (left to the general path's checks, unchecked here)
    monkeypatch.setattr(packed, "lookup", lambda weight: object())  # every weight prepacked
    assert layer(x, w, b, algo="accurate") is None and layer(x, w, b, algo="fp16x3") is None
    assert layer(x, w, b, algo="auto") is not None  # (no algo that plans fp16x3 reads the pieces)
    assert layer(x.double(), w.double(), b.double(), algo="accurate") is not None  # (pieces: float32 only)
    planner.clear()


def test_a_product_signature_is_checked_once_and_a_bmm_takes_it_where_its_batch_is_in_the_grid(monkeypatch):
    """``gemm.product``: a 2-D or torch.bmm (3-D, one batch of more than one entry) signature
    seen before runs no check and takes its launcher into a new output of the checked shape; a
    batch the family loops over (its plan's ``batch`` 0), an empty output, other ranks, batches
    that differ or broadcast and an unhashable algo are left to the general path (None), the
    first two checked once. CPU tensors, the plan and the launcher stubbed."""
    from cupy_ops.ops.gemm import planner

    ran, checked = [], []
    monkeypatch.setattr(planner, "launcher_for", lambda a, b, e, algo: lambda *args: ran.append(args[2].shape))
    batched = {"auto": 1, "accurate": 0}  # the stub's plan: a batched kernel, or a loop over the batch
    monkeypatch.setattr(planner, "plan_for", lambda a, b, e, algo: type("P", (), {"batch": batched[algo] * a.shape[0]}))
    planner.clear()

    def check(a, b, algo, algos):
        checked.append(1)
        return torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])

    def product(a, b, algo="auto"):
        return planner.product(a, b, algo, check)

    a, b = torch.randn(4, 6, 8), torch.randn(4, 8, 5)
    for _ in range(2):
        assert product(a, b).shape == (4, 6, 5) and product(a[0], b[0]).shape == (6, 5)
    assert len(checked) == 2 and ran == [(4, 6, 5), (6, 5)] * 2
    for _ in range(2):  # looped over, empty: checked once, the general path's
        assert product(a, b, "accurate") is None and product(a[:, :0], b) is None
    assert len(checked) == 4
    for x, y in [(a, b[0]), (a[0], b), (a[:2], b), (a[:1], b[:1]), (a.unsqueeze(0), b.unsqueeze(0))]:
        assert product(x, y) is None, (x.shape, y.shape)  # folded, 2-D with a batch, one entry, 4-D
    assert product(a, b, ["auto"]) is None and len(checked) == 4
    planner.clear()


@pytest.mark.parametrize("with_start", [False, True], ids=["launcher", "start, then finish"])
@pytest.mark.parametrize("fold", [False, True], ids=["2-D x", "3-D x folded"])
def test_a_layers_entry_runs_into_a_new_output(fold, with_start):
    """``run_layer``: the entry's launcher runs on x's rows (a view of (M, K) where folded),
    ``weight.T`` and the new output (its view of M rows), with the epilogue's arguments; a
    launcher with a ``start`` (fp16x3's) gets it before the output is allocated, then
    ``finish``. CPU, the launcher a recorder."""
    from cupy_ops.ops.gemm import planner

    events = []
    x = torch.randn(2, 3, 4) if fold else torch.randn(6, 4)
    w = torch.randn(5, 4)

    def fn(a, b, c, epi):
        events.append(("run", a.shape, b.shape, c.shape, c.data_ptr(), epi))

    def start(a, b):
        events.append(("start", a.shape, b.shape))
        return lambda c, epi: events.append(("finish", c.shape, c.data_ptr(), epi))

    shape = (*x.shape[:-1], 5)
    out = planner.run_layer((shape, x.device, 6, fold, fn, None, start if with_start else None), x, w, ("e",))
    assert out.shape == shape and out.dtype == x.dtype
    if with_start:
        assert events == [("start", (6, 4), (4, 5)), ("finish", (6, 5), out.data_ptr(), ("e",))]
    else:
        assert events == [("run", (6, 4), (4, 5), (6, 5), out.data_ptr(), ("e",))]


# A user epilogue at the store or by a pass after the GEMM (planner.epilogue_after): the examples'
# epilogues (examples/kernelbench_level2.py) on the layer of 1024 x 8192 x 8192 (128 x ...: *),
# the GEMM without it and what each way adds to it, us, interleaved in one process (H200, kernel times,
# L2 flushed, medians; docs/epilogues.md#after-the-gemm)
MEASURED_AFTER_H200 = [
    ("MULTIPLY_LEAKY_RELU", torch.bfloat16, 1024, 175.2, 2.4, 10.9),
    ("MISH_MISH", torch.bfloat16, 1024, 175.3, 106.2, 26.4),
    ("SIGMOID_SCALE_RESIDUAL", torch.bfloat16, 1024, 175.7, 19.3, 16.8),
    ("ADD_RELU", torch.bfloat16, 1024, 175.8, 1.9, 16.0),
    ("DIVIDE_GELU", torch.bfloat16, 1024, 175.5, 9.7, 15.9),
    ("GELU_ONLY", torch.bfloat16, 1024, 175.1, 8.9, 15.4),
    ("MULTIPLY_LEAKY_RELU", torch.float32, 1024, 786.7, 5.9, 19.7),
    ("MISH_MISH", torch.float32, 1024, 805.8, 65.6, 19.5),
    ("SIGMOID_SCALE_RESIDUAL", torch.float32, 1024, 782.4, 31.9, 25.0),
    ("ADD_RELU", torch.float32, 1024, 799.0, -0.6, 21.0),
    ("DIVIDE_GELU", torch.float32, 1024, 798.1, 4.3, 15.5),
    ("GELU_ONLY", torch.float32, 1024, 790.9, 12.7, 22.7),
    ("MISH_MISH", torch.bfloat16, 128, 46.4, 11.5, 6.3),
    ("SIGMOID_SCALE_RESIDUAL", torch.bfloat16, 128, 46.6, 4.9, 4.6),
]


def _example_epilogues():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
    path = Path(__file__).resolve().parents[3] / "examples" / "kernelbench_level2.py"
    spec = importlib.util.spec_from_file_location("kernelbench_level2_epilogues", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name, dtype, M, bare_us, store_us, after_us", MEASURED_AFTER_H200, ids=str)
def test_an_epilogue_is_applied_by_a_pass_where_that_measured_faster(name, dtype, M, bare_us, store_us, after_us):
    """The cost model's estimates are of the measured order (within 2x of it, from 10 us),
    and the plan takes the pass exactly where it measured more than 2 % of the bare layer faster
    than the store (the GEMM then stores the Linear's output, and the plan says why)."""
    e = getattr(_example_epilogues(), name)
    N = K = 8192
    ops = gemm.runtime.serial_ops(e.tag, dtype, "sm_90")
    t = gemm.planner.after_estimates(e.tag, M, N, dtype, H200, ops)
    # (the store's straight-line arithmetic is not modelled: without such instructions it is 0)
    for est, got in ((t["store"], store_us if ops else 0.0), (t["after"], after_us)):
        assert got < 10 or 0.5 * got <= est <= 2 * got, (t, store_us, after_us)
    p = gplan(M, K, N, dtype, b=colmajor(K, N, dtype), epi=e.tag, dev=H200, algo="accurate")
    if abs(store_us - after_us) > 0.02 * bare_us:
        assert (p.after == e.tag) == (after_us < store_us), (p, t)
    if p.after:
        assert gemm.epilogues.LINEAR.tag in p.kernel and e.tag not in p.kernel, p
        assert "by a pass after the GEMM" in str(p)
    assert gplan(M, K, N, dtype, b=colmajor(K, N, dtype), epi=e.tag, dev=H200, after=False).after is None


def test_an_epilogue_in_a_straight_line_stays_at_the_store_and_small_outputs_compile_nothing(monkeypatch):
    _example_epilogues()  # (NVRTC)
    leaky = gemm.epilogues.declare(
        "__device__ acc_t apply(acc_t v, acc_t s) { return v > 0 ? v : v * s; }", scalars=("s",), name="leaky_plan"
    )
    root = gemm.epilogues.declare("__device__ acc_t apply(acc_t v) { return sqrt(fabs(v)) / (v + 3); }", name="root")
    assert gemm.runtime.serial_ops(leaky.tag, torch.bfloat16, "sm_90") == 0
    assert gemm.runtime.serial_ops(root.tag, torch.float32, "sm_90") == 2  # a root and a division
    assert gemm.runtime.serial_ops(root.tag, torch.float64, "sm_90") == 2
    assert gplan(1024, 8192, 8192, torch.bfloat16, epi=leaky.tag, dev=H200).after is None
    assert gplan(1024, 8192, 8192, torch.bfloat16, epi=root.tag, dev=H200).after == root.tag
    # a small output: even 8 such instructions would not pay for the pass, so none is counted
    monkeypatch.setattr(gemm.planner, "serial_ops", lambda *a: pytest.fail("compiled to count"))
    assert gplan(64, 64, 64, torch.bfloat16, epi=root.tag, dev=H200).after is None
    # split-K's reduction applies the epilogue already, a pass itself; the built-ins never
    p = gplan(128, 8192, 128, torch.bfloat16, epi=root.tag, dev=H200, after=True)
    assert p.reduce is not None and p.after is None
    assert gplan(1024, 1024, 1024, torch.bfloat16, epi="EpiBiasReluScale", dev=H200, after=True).after is None
    assert gplan(1024, 1024, 1024, torch.bfloat16, epi=gemm.epilogues.LINEAR.tag, dev=H200, after=True).after is None


def test_the_after_override_takes_any_family_and_its_kernels_are_registered():
    e = gemm.epilogues.declare("__device__ acc_t apply(acc_t v) { return v / 3; }", name="third")
    registered = {f: set(v) for f, v in gemm.variants().items()}
    for algo, dtype, dev in [
        ("simt", torch.float32, H100),
        ("naive", torch.float64, H100),
        ("tc", torch.float16, A100),
    ]:
        p = gplan(300, 200, 100, dtype, epi=e.tag, dev=dev, algo=algo, after=True)
        assert p.family == algo and p.after == e.tag and gemm.epilogues.LINEAR.tag in p.kernel, p
        plain = gplan(300, 200, 100, dtype, epi=gemm.epilogues.LINEAR.tag, dev=dev, algo=algo)
        assert p.kernel == plain.kernel and p.grid == plain.grid
    assert set(gemm.runtime.after_variants()) <= registered["gemm.cu"]
