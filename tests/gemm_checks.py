"""Shared by the GEMM tests: the rigorous rounding-error bound a product is checked against, each
algo's operand roundoff, the plan a call takes, torch fp32's own error for comparison, and a
Linear's eager path by signature watched or turned off."""

import contextlib

import torch

from cupy_ops.ops import gemm

from conftest import ALL_DTYPES, UNIT_ROUNDOFF


def accumulation_roundoff(dtype):
    return UNIT_ROUNDOFF[torch.float64 if dtype == torch.float64 else torch.float32]


def assert_gemm_close(got, a, b, extra_abs=None, operand_roundoff=0.0):
    """``got`` equals a @ b (+ whatever ``extra_abs`` bounds) within the rounding-error bound.

    ``operand_roundoff``: the unit roundoff the kernel rounds its operands to first (TF32:
    2**-11), which perturbs each product by at most twice that, relative.
    """
    dtype = got.dtype
    K = a.shape[1]
    ref = a.double() @ b.double()
    u = accumulation_roundoff(dtype)
    gamma = K * u / (1 - K * u)

    # rounding in the subnormal range is absolute, not relative: up to half the smallest
    # subnormal of the accumulator at each of the K steps, and of the dtype at the final rounding
    def half_subnormal(t):
        return torch.finfo(t).smallest_normal * torch.finfo(t).eps / 2

    acc = torch.float64 if dtype == torch.float64 else torch.float32
    tiny = K * half_subnormal(acc) + half_subnormal(dtype)
    absprod = a.double().abs() @ b.double().abs()
    bound = (gamma + 2 * operand_roundoff) * absprod + UNIT_ROUNDOFF[dtype] * ref.abs() + tiny
    if extra_abs is not None:
        bound = bound + extra_abs
    err = (got.double() - ref).abs()
    bad = ~(err <= bound)
    if bad.any():
        i = int((err / bound).nan_to_num(float("inf")).flatten().argmax())
        raise AssertionError(
            f"{int(bad.sum())} of {got.numel()} outside the rounding bound; worst (relative to its "
            f"bound) at flat index {i}: error {err.flatten()[i].item():.3g}, bound "
            f"{bound.flatten()[i].item():.3g}, exact {ref.flatten()[i].item():.3g}, got "
            f"{got.flatten()[i].item():.3g}"
        )


def matmul_planned(a, b, **plan_kw):
    """a @ b through a plan made with overrides (``tile_n``, ``split_k``): the public tuning path."""
    c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    return gemm.run(gemm.plan_for(a, b, "EpiNone", **plan_kw), a, b, c)


def linear_planned(x, w, bias, d, **plan_kw):
    """linear_relu_div through a plan made with overrides."""
    y = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
    scale = float(torch.tensor(1.0 / d, dtype=torch.float32))  # d: a power of two here, exact
    return gemm.run(gemm.plan_for(x, w.t(), "EpiBiasReluScale", **plan_kw), x, w.t(), y, bias, scale)


# (algo, dtype) pairs: every kernel family with every dtype it serves
ALGO_DTYPES = [("naive", dt) for dt in ALL_DTYPES] + [
    ("simt", torch.float32),
    ("auto", torch.float32),
    ("auto", torch.bfloat16),
    ("auto", torch.float16),
    ("tc", torch.bfloat16),
    ("tc", torch.float16),
    ("tc", torch.float32),
    ("wgmma", torch.bfloat16),
    ("wgmma", torch.float16),
    ("wgmma", torch.float32),
    ("tf32x3", torch.float32),
    ("fp16x3", torch.float32),
]


def roundoff(algo, dtype):
    """Operand rounding of the kernel: TF32 for fp32 operands on tensor cores (3xTF32: its
    split's remainder)."""
    if dtype != torch.float32:
        return 0.0
    return TF32_ROUNDOFF if algo in ("tc", "wgmma") else TF32X3_ROUNDOFF if algo in ("tf32x3", "fp16x3") else 0.0


def max_rel_err(c, ref):
    """The error measure of the benchmarks: max |C - ref| / max |ref|."""
    return ((c.double() - ref).abs().max() / ref.abs().max()).item()


def torch_fp32(a, b):
    """torch's own fp32 product (TF32 off, as torch's default)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def shifted(a, b):
    """(a', b') in float64: the operands fp16x3 splits, the largest finite magnitudes of one's
    K-slices moved to the other's by powers of two (exact): of a's columns where
    gemm.fp16x3.k_source says "a" (M < N), else of b's rows (a' = a 2^t, b' = b 2^-t; t the
    floor(log2) of each row's largest in [-126, 126], 0 for a row with none)."""
    a64, b64 = a.double(), b.double()
    if a.numel() == 0 or b.numel() == 0:  # no K, or no row or column to take t from (t = 0)
        return a64, b64
    from_a = gemm.fp16x3.k_source(a.shape[0], b.shape[1]) == "a"
    src = a.t() if from_a else b  # (K, rows)
    mag = torch.where(src.isfinite(), src.abs(), 0).amax(1).double()
    t = torch.exp2(torch.where(mag > 0, torch.frexp(mag)[1] - 1, 0).clamp(-126, 126).double())
    if from_a:
        t = 1 / t
    return a64 * t, b64 / t[:, None]


TF32_ROUNDOFF = 2.0**-11  # operands rounded to the nearest TF32 (mma.sync: cvt.rna; wgmma: the TMA load)


# 3xTF32: a = hi + lo with lo rounded to TF32 (< 2^-22 |a| lost per operand) and lo * lo
# dropped (< 2^-20 |a b|): < 1.5 x 2^-20 per product; 2 x roundoff = 2^-18 covers it with room
# for the tensor cores' accumulation, which truncates (1 ulp, not half) within each promoted
# partial sum (at these K the gamma_K term of the bound is far larger still). fp16x3's pieces
# have the same 11-bit significands (gemm_fp16x3.cuh), so the same bound, for values within
# 2^17 of their row's largest (randn's rows span less).
TF32X3_ROUNDOFF = 2.0**-19


def seeded_randn(device, dtype, seed: int):
    """``rnd(*shape)``: torch.randn of ``dtype`` on ``device`` from a generator seeded ``seed``."""
    g = torch.Generator(device=device).manual_seed(seed)
    return lambda *shape: torch.randn(*shape, device=device, generator=g).to(dtype)


def spy_layers(monkeypatch) -> list:
    """The entries ``gemm.layer`` (a Linear's eager path by signature) returns from now on, in
    call order; None where it left the call to the general path."""
    entries, layer = [], gemm.layer
    monkeypatch.setattr(gemm, "layer", lambda *a: entries.append(layer(*a)) or entries[-1])
    return entries


@contextlib.contextmanager
def general_path(monkeypatch):
    """A context in which every Linear call takes the general path (checks, plan, launch)."""
    with monkeypatch.context() as m:
        m.setattr(gemm, "layer", lambda *a: None)
        yield
