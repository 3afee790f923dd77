"""The GEMM probes' shared set-up (benchmarks/probe_*.py): a case's operands and torch's own
call for it. A case: dtype, TF32 on or off, M, K, N, the layout of b ("N": row-major (K, N),
matmul's; "K": the nn.Linear weight's (N, K) seen as (K, N)) and the epilogue ("EpiNone":
a @ b; "EpiBiasReluScale": the layer relu(a @ b + bias) / 2)."""
import torch

# The small outputs the probes of the one-tile-per-CTA kernels time (sessions 17-18): the K
# split's and gemm_wgmma_single's shapes, N- and K-major b, both epilogues, TF32 among them.
SMALL_SHAPES = [(torch.bfloat16, False, 1024, 1024, 1024, "N", "EpiNone"),
                (torch.float16, False, 1024, 1024, 1024, "N", "EpiNone"),
                (torch.bfloat16, False, 1024, 4096, 1024, "N", "EpiNone"),
                (torch.bfloat16, False, 256, 1024, 1024, "K", "EpiBiasReluScale"),
                (torch.float32, True, 1024, 1024, 1024, "K", "EpiBiasReluScale"),
                (torch.bfloat16, False, 1024, 1024, 1024, "K", "EpiBiasReluScale")]


def operands(dt: torch.dtype, M: int, K: int, N: int, layout: str, tf32: bool = False):
    """``(a, b, bias)``: randn values on the GPU in that layout; TF32 switched as the case says
    (torch's matmul reads the switch)."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(N, K, device="cuda", dtype=dt).t() if layout == "K" else torch.randn(K, N, device="cuda", dtype=dt)
    return a, b, torch.randn(N, device="cuda", dtype=dt)


def torch_op(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, epi: str):
    """torch's call for the case (the reference the probes time against)."""
    if epi == "EpiNone":
        return lambda: torch.matmul(a, b)
    w = b.t()
    return lambda: torch.relu(torch.nn.functional.linear(a, w, bias)) / 2.0


def case_name(dt: torch.dtype, tf32: bool, M: int, K: int, N: int, layout: str) -> str:
    return f"{'tf32' if tf32 else str(dt)[6:]} {M}x{K}x{N} {layout}"


def prepared(shapes, rounds: int = 1):
    """Each case of ``shapes`` (tuples (dtype, tf32, M, K, N, layout, epi)), ``rounds`` times
    over: ``(case, a, b, bias, c, fns)``, ``c`` an empty (M, N) output and ``fns`` holding
    torch's call as "torch" (the probe adds its own)."""
    for _ in range(rounds):
        for case in shapes:
            dt, tf32, M, K, N, layout, epi = case
            a, b, bias = operands(dt, M, K, N, layout, tf32)
            yield case, a, b, bias, torch.empty(M, N, device="cuda", dtype=dt), {"torch": torch_op(a, b, bias, epi)}


def odd_cases(dtypes, shapes, **plan_kw):
    """The probes' correctness cases: each ``(dtype, tf32)`` of ``dtypes`` x ``(M, K, N)`` of
    ``shapes`` x b layout ("N", "K") x epilogue, as ``(label, epi, a, b, bias, c, p)``: ``p`` the
    Hopper plan ``gemm.plan_for(a, b, epi, "wgmma", **plan_kw)``, ``c`` an empty (M, N) output;
    a case the plan refuses is printed as skipped."""
    from cupy_ops.ops import gemm

    for dt, tf32 in dtypes:
        for M, K, N in shapes:
            for layout in ("N", "K"):
                for epi in ("EpiNone", "EpiBiasReluScale"):
                    a, b, bias = operands(dt, M, K, N, layout, tf32)
                    label = case_name(dt, tf32, M, K, N, layout)
                    try:
                        p = gemm.plan_for(a, b, epi, "wgmma", **plan_kw)
                    except ValueError as e:
                        print("skip", label, e)
                        continue
                    yield label, epi, a, b, bias, torch.empty(M, N, device="cuda", dtype=dt), p


def runner(p, a, b, c, bias, kernels: dict):
    """A call of plan ``p`` (the layer's scale 0.5) with ``kernels`` (kernel name -> a
    cupy_ops.Kernel build) put in place of gemm.KERNELS's entries first: the probes time
    several builds of one kernel in one process."""
    from cupy_ops.ops import gemm

    def f():
        gemm.KERNELS.update(kernels)
        gemm.run(p, a, b, c, bias, 0.5)
    return f


def ratios(t: dict, names) -> str:
    """``"torch T us  name T ratio ..."``: the medians of ``time_cuda_interleaved``'s ``t`` (ms)
    in us, and torch's time over each of ``names``'s (those in ``t``)."""
    tr = t["torch"].median
    return f"torch {tr * 1e3:8.2f} us  " + "  ".join(
        f"{k} {t[k].median * 1e3:8.2f} {tr / t[k].median:5.3f}x" for k in names if k in t)
