"""Calls every cupy_ops kernel variant on edge shapes; run under compute-sanitizer by
tools/sanitize.sh (memcheck, racecheck, initcheck)."""

import torch

import cupy_ops
from cupy_ops.ops import gemm

torch.manual_seed(0)
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
calls = 0
for dtype in DTYPES:
    for n in (1, 3, 129, 4097):
        base = torch.randn(n + 9, device="cuda").to(dtype)
        for off in (0, 1, 3):
            x = base[off : off + n]
            cupy_ops.relu(x)
            cupy_ops.relu_div(x, 3.0)
            cupy_ops.relu_(x.clone())
            cupy_ops.relu_div(x, torch.tensor(2.0, device="cuda"))
            g = x.clone().requires_grad_()
            cupy_ops.relu_div(g, 2.0).sum().backward()  # relu_backward
            calls += 5
    x2 = torch.randn(33, 65, device="cuda").to(dtype)
    cupy_ops.relu(x2.t())
    cupy_ops.relu(x2[:, ::2])
    calls += 2
    probe = torch.ones(1, 1, device="cuda", dtype=dtype)
    algos = []
    for algo in ("naive", "simt", "tc", "wgmma", "tf32x3", "fp16x3"):  # every family this GPU runs for the dtype
        try:
            cupy_ops.gemm_plan(probe, probe, algo=algo)
            algos.append(algo)
        except ValueError:
            pass
    for algo in algos:
        for M, K, N in [(1, 1, 1), (129, 65, 33), (130, 17, 257), (64, 128, 128), (64, 600, 40)]:  # last: split-K
            a = torch.randn(M, K, device="cuda").to(dtype)
            b = torch.randn(K, N, device="cuda").to(dtype)
            w = torch.randn(N, K, device="cuda").to(dtype)
            bias = torch.randn(N, device="cuda").to(dtype)
            cupy_ops.matmul(a, b, algo=algo)
            cupy_ops.matmul(a.t().contiguous().t(), b.t().contiguous().t(), algo=algo)
            cupy_ops.matmul(a, w.t(), algo=algo)  # b K-major without the fused epilogue
            cupy_ops.matmul(a.t().contiguous().t(), b, algo=algo)  # a M-major, b row-major
            cupy_ops.linear_relu_div(a, w, bias, 2.0, algo=algo)
            cupy_ops.linear_relu_div(a, w.t().contiguous().t(), None, -2.0, algo=algo)
            cupy_ops.linear_relu_div(a.t().contiguous().t(), w.t().contiguous().t(), bias, 2.0, algo=algo)
            calls += 7
        if algo == "wgmma":  # every compiled variant: tile widths, clusters, persistent grids, split-K,
            # both epilogue stores (the TMA's where C's rows allow it, and the threads'); float32
            # with a row-major b and TMA stores: the swapped kernel (C^T = B^T A^T)
            for bn, cluster, persistent, split in [
                (64, 1, False, False),
                (64, 1, True, False),
                (128, 2, True, False),
                (128, 2, True, True),
                (128, 1, False, True),
                (256, 2, True, False),
                (256, 1, True, False),
                (256, 1, False, False),
            ]:
                for M, K, N in [(129, 65, 33), (300, 130, 520), (1, 600, 300)]:
                    a = torch.randn(M, K, device="cuda").to(dtype)
                    for b in (
                        torch.randn(K, N, device="cuda").to(dtype),
                        torch.randn(N, K, device="cuda").to(dtype).t(),
                    ):
                        for store in (True, False):
                            try:
                                p = gemm.plan_for(
                                    a,
                                    b,
                                    algo="wgmma",
                                    tile_n=bn,
                                    cluster=cluster,
                                    persistent=persistent,
                                    split_k=split,
                                    tma_store=store,
                                )
                            except ValueError:  # no TMA store for this C (rows, split-K)
                                continue
                            gemm.run(p, a, b, torch.empty(M, N, device="cuda", dtype=dtype))
                            calls += 1
            # one tile per CTA, the epilogue staged in the ring: the K-splitting warpgroups, and
            # (16-bit) single 128 x 64 tiles
            forced = [dict(ksplit=True)] + ([dict(single=True)] if dtype != torch.float32 else [])
            for M, K, N in [(129, 65, 33), (300, 1000, 520), (1, 600, 300)]:
                a = torch.randn(M, K, device="cuda").to(dtype)
                bias = torch.randn(N, device="cuda").to(dtype)
                for b in (torch.randn(K, N, device="cuda").to(dtype), torch.randn(N, K, device="cuda").to(dtype).t()):
                    for store in (True, False):
                        for force in forced:
                            try:
                                p = gemm.plan_for(a, b, "EpiBiasReluScale", algo="wgmma", tma_store=store, **force)
                            except ValueError:  # no TMA store for this C
                                continue
                            gemm.run(p, a, b, torch.empty(M, N, device="cuda", dtype=dtype), bias, 0.5)
                            calls += 1
        if algo == "tf32x3":  # the split's rare path: TF32-exact values, +-inf, NaN, subnormals
            a = torch.randn(129, 300, device="cuda")
            a[::3] = 1.0
            a[1, ::7], a[2, ::5], a[4, ::3] = float("inf"), float("nan"), 1e-40
            cupy_ops.matmul(a, a.t().contiguous(), algo=algo)
            cupy_ops.matmul(a, a[:128].t().contiguous(), algo=algo)  # b's rows 16-byte aligned: C^T = B^T A^T
            calls += 2
            # A split by a pass (tf32x3_split_a): both kernels, split-K, K % 4 = 1 (A's rows copied first)
            for M, K, N in [(129, 300, 200), (130, 1001, 36), (64, 600, 40)]:
                x, w = torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda")
                x[1, ::7], x[2, ::5] = float("nan"), 1e-40
                for b in (w.t(), w.t().contiguous()):
                    for epi, args in (("EpiNone", ()), ("EpiBiasReluScale", (torch.randn(N, device="cuda"), 0.5))):
                        p = gemm.plan_for(x, b, epi, algo="tf32x3", presplit=True)
                        gemm.run(p, x, b, torch.empty(M, N, device="cuda"), *args)
                        calls += 1
        if algo == "fp16x3":  # the split's special values: fp16-exact, +-inf, NaN, subnormal rows, lost values
            a = torch.randn(129, 301, device="cuda")
            a[::3] = 1.0
            a[1, ::7], a[2, ::5], a[4] = float("inf"), float("nan"), 1e-40
            a[5, 0] = 1e20
            cupy_ops.matmul(a, a.t(), algo=algo)
            cupy_ops.matmul(a, a.t().contiguous(), algo=algo)  # b row-major, rows off 16 bytes: transposed
            cupy_ops.matmul(a, a[:128].t().contiguous(), algo=algo)  # b row-major, aligned: split N-major
            padded = torch.zeros(301, 132, device="cuda")
            padded[:, :129] = a.t()
            cupy_ops.matmul(a, padded[:, :127], algo=algo)  # N-major, rows 132 apart, N % 4 = 3
            held = gemm.geometry.X3H_SPLIT_THREADS * gemm.geometry.X3H_SPLIT_VECS * 4  # rows past it: read twice
            long_rows = torch.randn(5, held + 13, device="cuda")
            cupy_ops.matmul(long_rows, long_rows.t(), algo=algo)
            calls += 5
# the batched kernels: partial tiles, a broadcast entry (stride 0), a persistent grid
for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
    for algo in ("auto", "naive") + (("tc", "simt") if dtype != torch.float64 else ()):
        try:
            a = torch.randn(3, 130, 72, device="cuda", dtype=dtype)
            b = torch.randn(3, 72, 200, device="cuda", dtype=dtype)
            cupy_ops.matmul(a, b, algo=algo)
            cupy_ops.matmul(a, b[:1].expand(3, 72, 200), algo=algo)
            cupy_ops.matmul(a[:, :, :64], b.mT[:, :, :64].mT, algo=algo)  # b K-major
            cupy_ops.matmul(
                torch.randn(40, 64, 72, device="cuda", dtype=dtype),
                torch.randn(40, 72, 256, device="cuda", dtype=dtype),
                algo=algo,
            )  # > a wave
            calls += 4
        except ValueError:  # the family does not take this dtype here
            pass
k = cupy_ops.Kernel(
    "template <class T> __global__ void cp(const T* x, T* y, long long n) {"
    " long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }",
    "cp",
)
x = torch.randn(1000, device="cuda")
k(x, torch.empty_like(x), x.numel(), grid=4, block=256)
torch.cuda.synchronize()
print(f"sanitize_program: {calls + 1} op calls done (float32 on the tensor-core kernels: TF32)")
