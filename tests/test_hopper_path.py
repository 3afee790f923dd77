"""The host side of the Hopper GEMM path: the sm_90a-only source (compiled for that one
architecture, offline and at run time), TMA tensor-map arguments, the errors of
algo='wgmma'."""
import pytest
import torch

import cupy_ops
import cupy_ops.ops  # noqa: F401  (declares the kernels)
from cupy_ops import KernelCompileError, compiler
from conftest import HOPPER

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
SM90A = next(s for s in compiler.sources() if s.name == "gemm_sm90a.cu")


def test_sm90a_variant_is_built_for_that_arch_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    v = SM90A.variant("gemm_wgmma<bf16, true, 256, 2, EpiNone>")
    assert SM90A.options("sm_90a")[-16:] == ("-arch=sm_90a", "-DWG_BM=128", "-DWG_EPI_BYTES=32768",
                                             "-DWG_KSPLIT_BM=64", "-DWG_KSPLIT_SMEM_BYTES=232448",
                                             "-DWG_SMEM_BYTES=230496", "-DWG_SWAP_BOX=32",
                                             "-DWG_THREADS=384", "-DX3H_COLMAX_ROWS=32", "-DX3H_NSPLIT_ROWS=8",
                                             "-DX3H_NSPLIT_THREADS=256", "-DX3H_ROWCOL_THREADS=512",
                                             "-DX3H_ROWCOL_VECS=8", "-DX3H_SPLIT_THREADS=128",
                                             "-DX3H_SPLIT_VECS=8", "-DX3_SMEM_BYTES=232448")
    b = compiler.binary(v, "sm_90a")
    assert b.image[:4] == b"\x7fELF" and "gemm_wgmma" in b.lowered


def test_sm90a_compile_error_carries_the_log():
    src = compiler.user('extern "C" __global__ void k() { undeclared_x; }', "bad_sm90a.cu", arch="sm_90a")
    with pytest.raises(KernelCompileError) as info:
        compiler.binary(src.variant("k"), "sm_90a")
    assert "undeclared_x" in info.value.log and "-arch=sm_90a" in str(info.value)


def test_sm90a_sources_are_skipped_for_other_archs():
    assert SM90A.target("sm_90") == "sm_90a" and SM90A.target("sm_80") is None
    assert SM90A.target("sm_100") is None


def test_tensor_map_argument_must_be_128_bytes():
    k = cupy_ops.Kernel("struct __align__(64) TmaMap { unsigned long long o[16]; };\n"
                        "__global__ void k(const __grid_constant__ TmaMap m, float* y) { }", "k")
    assert [kind for kind, _, _ in k.params] == ["tmap", "ptr"]
    with pytest.raises(TypeError, match="argument 'm' of kernel k .* must be the 128 bytes of a TMA tensor map"):
        k(b"short", None, grid=1, block=1)


@pytest.mark.gpu
def test_wgmma_algo_errors(cuda):
    a = torch.randn(8, 8, device=cuda, dtype=torch.float64)
    with pytest.raises(ValueError, match="algo='wgmma' takes float16, bfloat16 or float32"):
        cupy_ops.matmul(a, a, algo="wgmma")
    if not HOPPER:
        with pytest.raises(ValueError, match=r"algo='wgmma' needs a Hopper GPU \(compute capability 9.0\)"):
            cupy_ops.linear_relu_div(a.float(), a.float(), None, 2.0, algo="wgmma")


@pytest.mark.gpu
def test_tensor_map_rejected_by_the_driver_raises(cuda):
    if not HOPPER:
        pytest.skip("tensor maps need a Hopper GPU (compute capability 9.0)")
    from cupy_ops.ops.gemm import tma

    t = torch.zeros(64, 64, device=cuda, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"cuTensorMapEncodeTiled failed \(CUresult \d+\) for a 64x64"):
        tma.tensor_map(t, 64, 64, 64, 512, 64)   # a box wider than 256 elements


def test_launch_config_matches_cuda_h():
    """The ctypes CUlaunchConfig that cuLaunchKernelEx and cuOccupancyMaxActiveClusters read:
    seven unsigned ints, then the stream, the attribute pointer and their count at cuda.h's
    64-bit offsets; and the CUlaunchAttribute carrying the cluster dimension: the id, padding to
    8 bytes, a 64-byte value union whose clusterDim is its first three unsigned ints."""
    import ctypes

    from cupy_ops.launch import _LaunchAttribute, _LaunchConfig, _cluster_attribute

    assert ctypes.sizeof(_LaunchConfig) == 56
    assert [getattr(_LaunchConfig, f).offset for f in ("sharedMemBytes", "hStream", "attrs", "numAttrs")] == \
        [24, 32, 40, 48]
    assert ctypes.sizeof(_LaunchAttribute) == 72
    assert [getattr(_LaunchAttribute, f).offset for f in ("id", "x", "y", "z")] == [0, 8, 12, 16]
    a = _cluster_attribute(2)
    assert (a.id, a.x, a.y, a.z) == (4, 2, 1, 1)   # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION


def test_a_failed_cluster_launch_raises_with_the_drivers_code(monkeypatch):
    """cuLaunchKernelEx's error (with a current context: no retry) is a RuntimeError naming the
    kernel, its device, the CUresult and the launch (driver stubbed: runs without a GPU)."""
    import types

    from cupy_ops import launch

    calls = []
    monkeypatch.setattr(launch, "_launch_kernel_ex", lambda *a: calls.append(a) or 1)   # CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(launch, "_driver", types.SimpleNamespace(ctxGetCurrent=lambda: 1))
    h = types.SimpleNamespace(name="gemm_wgmma<bf16, true, 256, 2, EpiNone>", device=0, ptr=1234, non_portable=False)
    with pytest.raises(RuntimeError, match=r"cuLaunchKernelEx failed \(CUresult 1\) for gemm_wgmma<bf16, true, 256, 2, "
                                           r"EpiNone> on cuda:0 \(grid \(132, 1, 1\), clusters of \(2, 1, 1\), block "
                                           r"\(384, 1, 1\), 230496 bytes of shared memory\)"):
        launch._launch_ex(h, (132, 1, 1), (384, 1, 1), 230496, 0, 0, 2, False)
    assert len(calls) == 1   # a context was current: not retried


CLUSTER_MISMATCH = """
import torch
from cupy_ops import launch
from cupy_ops.ops import gemm
a = torch.randn(4096, 256, device="cuda", dtype=torch.bfloat16)
b = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
c = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
p = gemm.plan_for(a, b, "EpiNone", "wgmma")
assert p.cluster == 2, p
a_map, b_map, keep = gemm.wgmma.maps(p, a, b)
h = gemm.runtime.handle(gemm.wgmma.KERNELS, p.kernel, 0)
args = (a_map, b_map, gemm.wgmma.NO_MAP, 0, c.data_ptr(), 4096, 4096, 4096, 256, p.group, 0, 1.0)
launch.launch(h, p.grid, p.block, args, p.smem, cluster=1)   # the pair kernel without its clusters
try:
    torch.cuda.synchronize()
except RuntimeError as exc:
    print("trapped:", exc)
"""


def test_a_cluster_kernel_launched_without_its_cluster_traps(cuda):
    """The Hopper kernels take their cluster size from the launch (launch(..., cluster=)), not
    from __cluster_dims__; one launched with another size traps before any multicast or remote
    arrive could reach a CTA that is not there (in a child process: the trap ends the CUDA
    context)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from cupy_ops.ops import gemm

    if not gemm.device_info(0).has_wgmma:
        pytest.skip("needs a Hopper GPU (compute capability 9.0)")
    proc = subprocess.run([sys.executable, "-c", CLUSTER_MISMATCH], cwd=Path(__file__).resolve().parents[1],
                          env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert "trapped:" in proc.stdout, (proc.stdout, proc.stderr)


def test_the_persistent_grid_is_lowered_to_the_clusters_that_fit(cuda, monkeypatch):
    """A persistent plan's grid is an upper bound: the runner asks the driver how many clusters
    of the kernel run at once and launches no more (a larger grid would run its last clusters
    after the first ones: twice the time). The grid actually launched is read off
    ``cupy_ops.launch.launch``: clusters of 2, at most the driver's count of them; with that
    count made 5, a grid of 10 CTAs that still walks every tile (the result stays right)."""
    from cupy_ops import launch
    from cupy_ops.ops import gemm

    if not gemm.device_info(0).has_wgmma:
        pytest.skip("needs a Hopper GPU (compute capability 9.0)")
    torch.manual_seed(0)
    a = torch.randn(4096, 256, device=cuda, dtype=torch.bfloat16)
    b = torch.randn(256, 4096, device=cuda, dtype=torch.bfloat16)
    p = gemm.plan_for(a, b, "EpiNone", "wgmma")
    assert p.persistent and p.cluster == 2 and p.grid[0] == 2 * (gemm.device_info(0).sm_count // 2), p
    h = gemm.runtime.handle(gemm.wgmma.KERNELS, p.kernel, a.get_device())
    slots = launch.resident_clusters(h, p.cluster, p.block, p.smem)
    assert 1 <= slots <= gemm.device_info(0).sm_count // 2
    assert launch.resident_clusters(h, p.cluster, p.block, p.smem) == slots   # cached on the handle
    launched, real = [], launch.launch

    def spy(h, grid, block, args, shared_mem=0, cluster=1):
        launched.append((h.name, tuple(grid), cluster))
        return real(h, grid, block, args, shared_mem, cluster)

    monkeypatch.setattr(launch, "launch", spy)
    ref = a.double() @ b.double()
    c = cupy_ops.matmul(a, b)
    assert launched == [(p.kernel, (min(p.grid[0], 2 * slots), 1, 1), 2)], launched
    torch.testing.assert_close(c.double(), ref, rtol=2**-8, atol=2**-8 * 16)
    # fewer clusters than tiles by far: each walks ~13 of the 128 pairs of tiles
    monkeypatch.setattr(launch, "resident_clusters", lambda *args: 5)
    launched.clear()
    c = cupy_ops.matmul(a, b)
    assert launched == [(p.kernel, (10, 1, 1), 2)], launched
    torch.testing.assert_close(c.double(), ref, rtol=2**-8, atol=2**-8 * 16)


def test_swapped_tf32_is_bit_identical_to_the_transposed_path(cuda):
    """TF32 with a row-major b computed as C^T = B^T A^T gives the transposed path's result bit
    for bit (docs/gemm.md#swap: the same k-order, the same TF32 rounding of each operand): the
    same tile width and cluster forced on both, tails in M, N and K, a persistent walk, and the
    fused epilogue."""
    from cupy_ops.ops import gemm

    if not gemm.device_info(0).has_wgmma:
        pytest.skip("needs a Hopper GPU (compute capability 9.0)")
    torch.manual_seed(0)
    for (M, K, N), (bn, cluster, persistent) in (((300, 200, 520), (128, 1, False)), ((129, 64, 256), (64, 1, False)),
                                                 ((1000, 72, 4100), (256, 2, True)), ((4100, 100, 1024), (128, 2, True))):
        a, b = torch.randn(M, K, device=cuda), torch.randn(K, N, device=cuda)
        bias = torch.randn(N, device=cuda)
        kw = dict(tile_n=bn, split_k=False, cluster=cluster, persistent=persistent)
        for epi, extra in (("EpiNone", ()), ("EpiBiasReluScale", (bias, 0.5))):
            outs = []
            for swap in (True, False):
                p = gemm.plan_for(a, b, epi, "wgmma", swap=swap, **kw)
                assert p.swap == swap and (p.b.prep == "n-major" if swap else p.b.prep == "transpose"), p
                outs.append(gemm.run(p, a, b, torch.empty(M, N, device=cuda), *extra))
            assert torch.equal(outs[0], outs[1]), (f"{epi} {M}x{K}x{N}: {(outs[0] != outs[1]).sum().item()} outputs "
                                                   f"differ between C^T = B^T A^T and the transposed path")
