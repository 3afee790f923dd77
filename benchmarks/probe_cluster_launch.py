"""Probe (GPU, Hopper): compile-time clusters (__cluster_dims__, what the Hopper kernels have)
against the same kernels compiled without them and launched with the cluster size as a launch
attribute (cuLaunchKernelEx, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; clusters of 1 then launch
as plain grids). Prints one line per shape and variant, prefixed by LABEL: ours against torch
in interleaved rounds (L2 flushed), each result checked against the table's.

A / B between two trees, alternating, same card: "ct" is the tree as it is; "rt" a copy whose
gemm_sm90a.cu has no __cluster_dims__, run with RT=1 (this script then launches the plans'
kernels of clusters > 1 through cuLaunchKernelEx):

    for i in 1 2; do PYTHONPATH=. python benchmarks/probe_cluster_launch.py ct
                     RT=1 PYTHONPATH=rt python benchmarks/probe_cluster_launch.py rt; done

Session 11: a K-splitting kernel given __cluster_dims__(1, 1, 1) ran up to 19 % slower in the
benchmark, with 30 % more L2 traffic under Nsight Compute for the same loads
(benchmarks/results/probe_ksplit_pair_h100_session11.log, ncu_cluster_dims_h100_session11.txt).
Outcome (probe_cluster_launch_h100_session11.log): pairs as fast either way, the swapped TF32
kernel (clusters of 1) 15.9 -> 14.4 us at 1024^3 without __cluster_dims__; the kernels now
take their cluster size from the launch (launch.launch(..., cluster=)), so on today's tree
both labels run the same thing.
"""
import ctypes
import os
import sys

import torch

from cupy_ops import launch
from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm

label = sys.argv[1] if len(sys.argv) > 1 else "-"
RT = os.environ.get("RT") == "1"


class _Attr(ctypes.Structure):
    """CUlaunchAttribute with the cluster dimension: id, padding, 64 bytes of value."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_int), ("x", ctypes.c_uint), ("y", ctypes.c_uint),
                ("z", ctypes.c_uint), ("rest", ctypes.c_char * 52)]


_CLUSTER_DIMENSION = 4   # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
clusters: dict[int, int] = {}   # kernel function pointer -> its plan's cluster size
_orig = None   # the driver's launch, under RT=1


def _launch_rt(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
    cm = clusters.get(f, 1)
    if cm == 1:
        return _orig(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra)
    attr = _Attr(_CLUSTER_DIMENSION, 0, cm, 1, 1)
    cfg = launch._LaunchConfig(gx, gy, gz, bx, by, bz, smem, stream, ctypes.cast(ctypes.pointer(attr), ctypes.c_void_p), 1)
    rc = _ex(ctypes.byref(cfg), ctypes.c_void_p(f), ctypes.c_void_p(params), None)
    if rc != 0:
        raise RuntimeError(f"cuLaunchKernelEx failed: CUresult {rc}")


_ex = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
_ex.restype = ctypes.c_int
_ex.argtypes = [ctypes.POINTER(launch._LaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

if RT:
    launch._bind_driver()
    _orig = launch._driver_launch
    launch._driver_launch = _launch_rt
    # the occupancy query needs the compile-time size; pairs of 1-CTA-per-SM kernels: half the SMs
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    launch.resident_clusters = lambda h, cluster, block, smem: sms // cluster

torch.manual_seed(0)
# (dtype, M, K, N, b layout, {variant: plan overrides})
SQ = dict(tile_n=128, split_k=False, persistent=False)
SHAPES = [(torch.bfloat16, 4096, 4096, 4096, "N", {"table": {}}),
          (torch.float16, 4096, 4096, 4096, "N", {"table": {}}),
          (torch.bfloat16, 2048, 2048, 2048, "N", {"table": {}}),
          (torch.bfloat16, 1024, 8192, 8192, "K", {"table": {}}),
          (torch.bfloat16, 1024, 1024, 1024, "N", {"table": {}, "cl1": dict(SQ, cluster=1), "cl2": dict(SQ, cluster=2)}),
          (torch.bfloat16, 1024, 4096, 1024, "N", {"table": {}, "cl1": dict(SQ, cluster=1), "cl2": dict(SQ, cluster=2)}),
          (torch.float32, 1024, 1024, 1024, "N", {"table": {}}),
          (torch.float32, 4096, 4096, 4096, "N", {"table": {}}),
          (torch.float32, 1024, 8192, 8192, "K", {"table": {}})]
for dt, M, K, N, layout, variants in SHAPES:
    torch.backends.cuda.matmul.allow_tf32 = dt == torch.float32
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(N, K, device="cuda", dtype=dt).t() if layout == "K" else torch.randn(K, N, device="cuda", dtype=dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    fns = {"torch": lambda: torch.matmul(a, b)}
    plans = {k: gemm.plan_for(a, b, "EpiNone", "wgmma", **kw) for k, kw in variants.items()}
    refs = {}   # by summation order: the K-splitting kernel's differs from the others' in last bits
    for k, p in plans.items():
        clusters[gemm._handle(p.kernel, c.get_device()).ptr] = p.cluster
        fns[k] = lambda p=p: gemm.run(p, a, b, c)
        fns[k]()
        ref = refs.setdefault(p.ksplit, c.clone())
        assert torch.equal(c, ref), f"{k} differs from {p.kernel}'s other variant"
    t = time_cuda_interleaved(fns, runs=200)
    tr = t["torch"].median
    for k in variants:
        name = f"{'tf32' if dt == torch.float32 else str(dt)[6:]} {M}x{K}x{N} {layout} {k}"
        print(f"{label:<3} {name:<28} torch {tr * 1e3:7.2f} us  ours {t[k].median * 1e3:7.2f} us "
              f"{tr / t[k].median:.3f}x  [{plans[k].kernel}]", flush=True)
