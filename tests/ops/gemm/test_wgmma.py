"""The host side of the Hopper GEMM path: the sm_90a-only source (compiled for that one
architecture, offline and at run time), TMA tensor-map arguments, the errors of
algo='wgmma'."""

import pytest
import torch

import cupy_ops
import cupy_ops.ops
from cupy_ops import KernelCompileError, compiler, launch
from cupy_ops.ops import gemm
from cupy_ops.ops.gemm import Matrix

from conftest import HOPPER, UNIT_ROUNDOFF, require_algo
from gemm_checks import assert_gemm_close, linear_planned, matmul_planned, roundoff
from gemm_plans import gplan, rowmajor

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
SM90A = next(s for s in compiler.sources() if s.name == "gemm_sm90a.cu")


def test_sm90a_variant_is_built_for_that_arch_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    v = SM90A.variant("gemm_wgmma<bf16, true, 256, 2, EpiNone>")
    # the arch, then the kernels' geometry as -D defines, by name (geometry.SM90A_DEFINES)
    defines = tuple(f"-D{k}={v}" for k, v in sorted(gemm.geometry.SM90A_DEFINES.items()))
    assert SM90A.options("sm_90a")[-1 - len(defines) :] == ("-arch=sm_90a", *defines)
    assert {"EPI_ARGS_BYTES", "WG_BM", "X3_SMEM_BYTES", "X3H_COLMAX_ROWS"} <= set(gemm.geometry.SM90A_DEFINES)
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
    k = cupy_ops.Kernel(
        "struct __align__(64) TmaMap { unsigned long long o[16]; };\n"
        "__global__ void k(const __grid_constant__ TmaMap m, float* y) { }",
        "k",
    )
    assert [kind for kind, _, _ in k.params] == ["tmap", "ptr"]
    with pytest.raises(TypeError, match=r"argument 'm' of kernel k .* must be the 128 bytes of a TMA tensor map"):
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
        tma.tensor_map(t, 64, 64, 64, 512, 64)  # a box wider than 256 elements


def test_launch_config_matches_cuda_h():
    """The ctypes CUlaunchConfig that cuLaunchKernelEx and cuOccupancyMaxActiveClusters read:
    seven unsigned ints, then the stream, the attribute pointer and their count at cuda.h's
    64-bit offsets; and the CUlaunchAttribute carrying the cluster dimension: the id, padding to
    8 bytes, a 64-byte value union whose clusterDim is its first three unsigned ints."""
    import ctypes

    from cupy_ops.launch import LaunchConfig, _LaunchAttribute, cluster_attribute

    assert ctypes.sizeof(LaunchConfig) == 56
    assert [getattr(LaunchConfig, f).offset for f in ("sharedMemBytes", "hStream", "attrs", "numAttrs")] == [
        24,
        32,
        40,
        48,
    ]
    assert ctypes.sizeof(_LaunchAttribute) == 72
    assert [getattr(_LaunchAttribute, f).offset for f in ("id", "x", "y", "z")] == [0, 8, 12, 16]
    a = cluster_attribute(2)
    assert (a.id, a.x, a.y, a.z) == (4, 2, 1, 1)  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION


def test_a_failed_cluster_launch_raises_with_the_drivers_code(monkeypatch):
    """cuLaunchKernelEx's error (with a current context: no retry) is a RuntimeError naming the
    kernel, its device, the CUresult and the launch (driver stubbed: runs without a GPU)."""
    import types

    calls = []
    monkeypatch.setattr(launch, "_launch_kernel_ex", lambda *a: calls.append(a) or 1)  # CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(launch, "_driver", types.SimpleNamespace(ctxGetCurrent=lambda: 1))
    h = types.SimpleNamespace(name="gemm_wgmma<bf16, true, 256, 2, EpiNone>", device=0, ptr=1234, non_portable=False)
    with pytest.raises(
        RuntimeError,
        match=r"cuLaunchKernelEx failed \(CUresult 1\) for gemm_wgmma<bf16, true, 256, 2, "
        r"EpiNone> on cuda:0 \(grid \(132, 1, 1\), clusters of \(2, 1, 1\), block "
        r"\(384, 1, 1\), 230496 bytes of shared memory\)",
    ):
        launch._launch_ex(h, (132, 1, 1), (384, 1, 1), 230496, 0, 0, 2, False)
    assert len(calls) == 1  # a context was current: not retried


CLUSTER_MISMATCH = """
import torch
from cupy_ops import launch
from cupy_ops.ops import gemm
a = torch.randn(4096, 256, device="cuda", dtype=torch.bfloat16)
b = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
c = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
p = gemm.plan_for(a, b, "EpiNone", "wgmma")
assert p.cluster == 2, p
a_map, b_map, keep = gemm.hopper.maps(p, a, b)
h = gemm.runtime.handle(gemm.wgmma.KERNELS, p.kernel, 0)
args = (a_map, b_map, gemm.hopper.NO_MAP, 0, c.data_ptr(), 4096, 4096, 4096, 256, p.group, *gemm.epilogues.NO_ARGS)
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
    proc = subprocess.run(
        [sys.executable, "-c", CLUSTER_MISMATCH],
        cwd=Path(__file__).resolve().parents[3],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "trapped:" in proc.stdout, (proc.stdout, proc.stderr)


def test_the_persistent_grid_is_lowered_to_the_clusters_that_fit(cuda, monkeypatch):
    """A persistent plan's grid is an upper bound: the runner asks the driver how many clusters
    of the kernel run at once and launches no more (a larger grid would run its last clusters
    after the first ones: twice the time). The grid actually launched is read off
    ``cupy_ops.launch.launch``: clusters of 2, at most the driver's count of them; with that
    count made 5, a grid of 10 CTAs that still walks every tile (the result stays right)."""
    from cupy_ops import launch, occupancy
    from cupy_ops.ops import gemm

    if not gemm.device_info(0).has_wgmma:
        pytest.skip("needs a Hopper GPU (compute capability 9.0)")
    torch.manual_seed(0)
    a = torch.randn(4096, 256, device=cuda, dtype=torch.bfloat16)
    b = torch.randn(256, 4096, device=cuda, dtype=torch.bfloat16)
    p = gemm.plan_for(a, b, "EpiNone", "wgmma")
    assert p.persistent and p.cluster == 2 and p.grid[0] == 2 * (gemm.device_info(0).sm_count // 2), p
    h = gemm.runtime.handle(gemm.wgmma.KERNELS, p.kernel, a.get_device())
    slots = occupancy.resident_clusters(h, p.cluster, p.block, p.smem)
    assert 1 <= slots <= gemm.device_info(0).sm_count // 2
    assert occupancy.resident_clusters(h, p.cluster, p.block, p.smem) == slots  # cached on the handle
    launched, real, real_packed = [], launch.launch, launch.launch_packed

    def spy(h, grid, block, args, shared_mem=0, cluster=1):
        launched.append((h.name, tuple(grid), cluster))
        return real(h, grid, block, args, shared_mem, cluster)

    def spy_packed(h, grid, block, packed, shared_mem=0, cluster=1):
        launched.append((h.name, tuple(grid), cluster))
        return real_packed(h, grid, block, packed, shared_mem, cluster)

    monkeypatch.setattr(launch, "launch", spy)
    monkeypatch.setattr(launch, "launch_packed", spy_packed)
    ref = a.double() @ b.double()
    c = cupy_ops.matmul(a, b)
    assert launched == [(p.kernel, (min(p.grid[0], 2 * slots), 1, 1), 2)], launched
    torch.testing.assert_close(c.double(), ref, rtol=2**-8, atol=2**-8 * 16)
    # fewer clusters than tiles by far: each walks ~13 of the 128 pairs of tiles
    monkeypatch.setattr(occupancy, "resident_clusters", lambda *args: 5)
    gemm.planner.clear()  # the launcher lowered its grid once, by the real occupancy
    launched.clear()
    c = cupy_ops.matmul(a, b)
    assert launched == [(p.kernel, (10, 1, 1), 2)], launched
    torch.testing.assert_close(c.double(), ref, rtol=2**-8, atol=2**-8 * 16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_linears_weight_takes_the_packed_launch(dtype, cuda, monkeypatch):
    """A Linear's K-major ``weight.T`` (read as it is) launches from arguments packed once per
    address set, as an N-major b does: calls at the same addresses encode no TMA map again
    (the launcher ran ``run_hopper``, maps included, on every call), a new epilogue scale or
    output address packs a new set; every result bit for bit the layer divided as torch divides."""
    from cupy_ops.ops.gemm import hopper

    if not gemm.device_info(0).has_wgmma:
        pytest.skip("needs a Hopper GPU (compute capability 9.0)")
    torch.manual_seed(0)
    x = torch.randn(512, 384, device=cuda, dtype=dtype)
    w = torch.randn(640, 384, device=cuda, dtype=dtype)
    b = torch.randn(640, device=cuda, dtype=dtype)
    p = gemm.plan_for(x, w.t(), "EpiBiasReluScale", "wgmma")
    assert p.family == "wgmma" and p.b.prep == "as is" and p.slices == 1 and not p.swap, p
    want = {d: cupy_ops.linear_relu(x, w, b, algo="wgmma") / d for d in (2.0, 3.0)}  # as torch divides
    linear_relu_div = cupy_ops.Op.declared("cupy_ops::linear_relu_div")
    out, other = torch.empty(512, 640, device=cuda, dtype=dtype), torch.empty(512, 640, device=cuda, dtype=dtype)
    gemm.planner.clear()
    encoded, real = [], hopper.maps
    monkeypatch.setattr(hopper, "maps", lambda *a: encoded.append(1) or real(*a))
    for d in (2.0, 2.0, 3.0, 3.0, 2.0):
        linear_relu_div(x, w, b, d, "wgmma", out=out)
        assert torch.equal(out, want[d]), d
    assert len(encoded) == 2  # one argument set a scale, at out's address
    linear_relu_div(x, w, b, 2.0, "wgmma", out=other)
    assert len(encoded) == 3 and torch.equal(other, want[2.0])


def test_swapped_tf32_is_bit_identical_to_the_transposed_path(cuda):
    """TF32 with a row-major b computed as C^T = B^T A^T gives the transposed path's result bit
    for bit (docs/gemm.md#swap: the same k-order, the same TF32 rounding of each operand): the
    same tile width and cluster forced on both, tails in M, N and K, a persistent walk, and the
    fused epilogue."""
    from cupy_ops.ops import gemm

    if not gemm.device_info(0).has_wgmma:
        pytest.skip("needs a Hopper GPU (compute capability 9.0)")
    torch.manual_seed(0)
    for (M, K, N), (bn, cluster, persistent) in (
        ((300, 200, 520), (128, 1, False)),
        ((129, 64, 256), (64, 1, False)),
        ((1000, 72, 4100), (256, 2, True)),
        ((4100, 100, 1024), (128, 2, True)),
    ):
        a, b = torch.randn(M, K, device=cuda), torch.randn(K, N, device=cuda)
        bias = torch.randn(N, device=cuda)
        kw = dict(tile_n=bn, split_k=False, cluster=cluster, persistent=persistent)
        for epi, extra in (("EpiNone", ()), ("EpiBiasReluScale", (bias, 0.5))):
            outs = []
            for swap in (True, False):
                p = gemm.plan_for(a, b, epi, "wgmma", swap=swap, **kw)
                assert p.swap == swap and (p.b.prep == "n-major" if swap else p.b.prep == "transpose"), p
                outs.append(gemm.run(p, a, b, torch.empty(M, N, device=cuda), *extra))
            assert torch.equal(outs[0], outs[1]), (
                f"{epi} {M}x{K}x{N}: {(outs[0] != outs[1]).sum().item()} outputs "
                f"differ between C^T = B^T A^T and the transposed path"
            )


def test_hopper_tile_width_and_split_k_follow_the_tables():
    p = gplan(4096, 4096, 4096, torch.bfloat16)  # 512 wide tiles: clusters of 2, persistent
    assert (p.tile, p.slices, p.grid, p.cluster, p.persistent) == ((128, 256), 1, (132, 1, 1), 2, True)
    assert p.kernel == "gemm_wgmma<bf16, true, 256, 2, EpiNone>" and p.b.prep == "n-major" and p.a.prep == "as is"
    assert p.group == gemm.tables.WG_GROUP and "persistent, cluster 2" in str(p)
    p = gplan(2048, 2048, 2048, torch.bfloat16)  # 0.97 waves of wide tiles: one CTA per tile
    assert (p.tile, p.cluster, p.persistent, p.grid) == ((128, 256), 1, False, (128, 1, 1))
    p = gplan(1024, 1024, 1024, torch.bfloat16, ksplit=False)  # 64 tiles of 128 x 128: under half a wave
    assert p.tile == (128, 64) and p.slices == 1 and p.grid == (128, 1, 1)  # 64-wide: one wave
    assert p.kernel == "gemm_wgmma<bf16, true, 64, 1, EpiNone>" and not p.persistent
    p = gplan(256, 1024, 1024, torch.bfloat16, epi="EpiBiasReluScale", ksplit=False)  # 16 tiles: split K in 2
    assert (p.slices, p.kslice, p.grid, p.tile) == (2, 512, (32, 1, 1), (128, 128))
    assert (
        p.kernel == "gemm_wgmma_partial<bf16, true, 128, 1>"
        and p.reduce == "gemm_splitk_reduce<bf16, EpiBiasReluScale>"
    )
    forced = gplan(256, 1024, 1024, torch.bfloat16, tile_n=256, split_k=False)
    assert forced.tile == (128, 256) and forced.slices == 1
    # 16 tiles of 128 x 128 whose K (8 k-tiles) does not split: 128 x 64 tiles, twice the CTAs
    p = gplan(512, 512, 512, torch.bfloat16, ksplit=False)
    assert (p.tile, p.slices, p.grid) == ((128, 64), 1, (32, 1, 1))
    assert p.kernel == "gemm_wgmma<bf16, true, 64, 1, EpiNone>"
    assert gplan(256, 1024, 1024, torch.bfloat16, ksplit=False, split_k=False).tile == (128, 64)


def test_hopper_clusters_and_persistent_grid():
    """Clusters of 2 from a wave of tiles on, run persistent (one cluster per 2 SMs at most, the
    runner lowers it to the clusters that fit); overrides for tuning; 128 x 64 tiles only in
    clusters of 1 (each CTA of a pair loads whole 64-column boxes of B)."""
    p = gplan(1024, 8192, 8192, torch.float32, b=rowmajor(8192, 8192).T, tf32=True)  # 8 x 32 wide tiles
    assert (p.cluster, p.persistent, p.grid, p.kernel) == (
        2,
        True,
        (132, 1, 1),
        "gemm_wgmma<float, false, 256, 2, EpiNone>",
    )
    assert gemm.wgmma.walk(1024, 8192, 256, 1, 2, 132) == (132, 4 * 32)
    assert gemm.wgmma.walk(300, 300, 128, 1, 2, 132) == (6 * 2, 2 * 3)  # 3 tile rows: 2 cluster rows
    assert gemm.wgmma.walk(1024, 1024, 128, 3, 1, 132) == (132, 8 * 8 * 3)  # split-K slices are units
    p = gplan(4096, 4096, 4096, torch.bfloat16, cluster=1)
    assert (p.cluster, p.persistent, p.grid) == (1, False, (512, 1, 1))
    p = gplan(4096, 4096, 4096, torch.bfloat16, cluster=1, persistent=True, group=3)
    assert (p.persistent, p.grid, p.group) == (True, (132, 1, 1), 3)
    p = gplan(4096, 4096, 4096, torch.bfloat16, persistent=False)
    assert (p.cluster, p.grid) == (2, (512, 1, 1))
    assert gplan(64, 4096, 4096, torch.bfloat16).cluster == 1  # one tile row: no pair to share B
    with pytest.raises(ValueError, match=r"cluster=2 needs tile_n >= 128 .*got tile_n=64"):
        gplan(4096, 4096, 4096, torch.bfloat16, cluster=2, tile_n=64)
    with pytest.raises(ValueError, match=r"cluster must be one of \(1, 2\), got 4"):
        gplan(4096, 4096, 4096, torch.bfloat16, cluster=4)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=r"group must be an int >= 1, got"):
            gplan(4096, 4096, 4096, torch.bfloat16, group=bad)
    # every variant a plan can name is registered (the offline check compiles them all)
    names = set(gemm.variants()["gemm_sm90a.cu"])
    for kw in ({}, {"cluster": 1}, {"tile_n": 64}, {"tile_n": 128, "cluster": 2}, {"tile_n": 256, "cluster": 2}):
        for M in (256, 1024, 4096):
            assert gplan(M, 1024, 1024, torch.bfloat16, **kw).kernel in names


def test_hopper_wide_grids_are_chosen_by_whole_waves():
    """From a wave of 128 x 256 tiles on, the tile width and cluster that finish first counting
    whole waves (WG_WIDE_SPEEDS): a last wave of 0.12 costs a whole one."""
    assert gemm.wgmma.wide(4096, 4096, 132) == (256, 2)  # 256 pairs / 66: 3.9 waves
    assert gemm.wgmma.wide(4224, 4096, 132) == (256, 1)  # 272 pairs: 5 waves; 528 tiles / 132: 4.0
    assert gemm.wgmma.wide(4352, 4096, 132) == (256, 2)  # 4.1 waves either way: pairs are faster
    assert gemm.wgmma.wide(3072, 3072, 132) == (128, 2)  # 2.2 -> 3 waves, 128-wide 4.4 -> 5 half waves
    assert gemm.wgmma.wide(128, 65536, 132) == (256, 1)  # one tile row: no pair
    assert gemm.wgmma.wide(2048, 2048, 132) is None  # under a wave: the tile_n table
    p = gplan(4224, 4096, 4096, torch.bfloat16)
    assert (p.tile, p.cluster, p.persistent, p.grid) == ((128, 256), 1, False, (528, 1, 1))
    p = gplan(3072, 4096, 3072, torch.bfloat16)
    assert (p.tile, p.cluster, p.persistent, p.grid) == ((128, 128), 2, True, (132, 1, 1))
    p = gplan(4224, 4096, 4096, torch.bfloat16, tile_n=256)  # an override: the old rule (clusters from a wave)
    assert p.cluster == 2


def test_hopper_epilogue_stores_through_the_tma_where_c_has_a_tensor_map():
    """TMA stores where C's rows (N elements) are a multiple of 16 bytes and C is the output
    (not split-K's partial products); the threads' stores otherwise, or when asked."""
    p = gplan(4096, 4096, 4096, torch.bfloat16)
    assert p.tma_store and "TMA stores" in str(p)
    assert not gplan(4096, 4096, 4100, torch.bfloat16).tma_store  # 8200-byte rows
    assert gplan(4096, 4096, 4100, tf32=True).tma_store  # 16400-byte rows
    assert not gplan(4096, 4096, 4097, tf32=True).tma_store
    p = gplan(256, 1024, 1024, torch.bfloat16, ksplit=False)  # split K
    assert p.slices > 1 and not p.tma_store
    p = gplan(4096, 4096, 4096, torch.bfloat16, tma_store=False)
    assert not p.tma_store and "thread stores" in str(p)
    assert gplan(4096, 4096, 4096, torch.bfloat16, tma_store=True).tma_store
    with pytest.raises(
        ValueError,
        match=r"tma_store=True needs C's rows a multiple of 16 bytes .*N = 4100 elements "
        r"of 2 bytes, 1 K slices",
    ):
        gplan(4096, 4096, 4100, torch.bfloat16, tma_store=True)
    assert not gplan(4096, 4096, 4096, algo="tf32x3").tma_store  # tf32x3: the threads' stores


def test_hopper_outputs_of_a_wave_of_64_x_64_tiles_take_them_split_between_the_warpgroups():
    """Outputs of at most a wave of 64 x 64 tiles (132 on an H100) with K of at most
    WG_KSPLIT_NARROW_MAX_KTILES k-tiles: the K-splitting warpgroups on 64 x 64 tiles, one CTA
    each, whatever the table would take otherwise (128 x 64 tiles, one 128 x 64 tile per CTA,
    64 x 128 K-split tiles); every dtype and layout but the swapped TF32 kernel's; overrides."""
    assert gemm.tables.WG_KSPLIT_NARROW_MAX_KTILES == 32
    assert gemm.wgmma.ksplit_narrow(512, 1024, 2048, 64, 132)  # 128 tiles, 32 k-tiles
    assert not gemm.wgmma.ksplit_narrow(512, 1088, 2048, 64, 132)  # 136 tiles: more than a wave
    assert not gemm.wgmma.ksplit_narrow(512, 1024, 2049, 64, 132)  # 33 k-tiles
    assert gemm.wgmma.ksplit_narrow(64, 8448, 1024, 32, 132)  # TF32: 32 k-tiles of 32
    p = gplan(512, 512, 512, torch.bfloat16)  # was 128 x 64 tiles, 32 CTAs
    assert p.ksplit and p.kernel == "gemm_wgmma_ksplit<bf16, true, 64, EpiNone>" and p.tma_store
    assert (p.tile, p.grid, p.cluster, p.persistent, p.slices) == ((64, 64), (64, 1, 1), 1, False, 1)
    assert p.smem == gemm.geometry.WG_KSPLIT_SMEM_BYTES
    p = gplan(512, 1024, 1024, torch.float16, b=rowmajor(1024, 1024, torch.float16).T, epi="EpiBiasReluScale")
    assert p.grid == (128, 1, 1) and p.kernel == "gemm_wgmma_ksplit<f16, false, 64, EpiBiasReluScale>"  # was single
    p = gplan(512, 2048, 512, torch.bfloat16)  # was 64 x 128 K-split tiles
    assert p.tile == (64, 64) and p.grid == (64, 1, 1)
    p = gplan(512, 1024, 512, tf32=True, b=rowmajor(512, 1024).T)
    assert p.kernel == "gemm_wgmma_ksplit<float, false, 64, EpiNone>" and p.grid == (64, 1, 1)
    assert gplan(512, 512, 512, tf32=True).swap  # TF32 with a row-major b: the swapped kernel
    assert gplan(1024, 1024, 1024, torch.bfloat16).single  # 256 tiles of 64 x 64: two waves
    assert gplan(512, 4096, 512, torch.bfloat16).slices > 1  # 64 k-tiles: split-K
    assert gplan(512, 2048, 512, tf32=True, b=rowmajor(512, 2048).T).slices > 1  # TF32: 64 k-tiles
    # overrides: any shape override or ksplit / single keeps the table's other kernels
    assert gplan(512, 512, 512, torch.bfloat16, ksplit=False).tile == (128, 64)
    assert gplan(512, 512, 512, torch.bfloat16, ksplit=True).tile == (64, 128)
    assert gplan(512, 512, 512, torch.bfloat16, single=True).single
    assert gplan(512, 512, 512, torch.bfloat16, tile_n=128).tile == (128, 128)
    assert gplan(512, 512, 512, torch.bfloat16, single=False).tile == (64, 64)
    p = gplan(4096, 4096, 4096, torch.bfloat16, ksplit=True, tile_n=64)  # asked: anywhere
    assert p.kernel == "gemm_wgmma_ksplit<bf16, true, 64, EpiNone>" and p.grid == (64 * 64, 1, 1)
    names = set(gemm.variants()["gemm_sm90a.cu"])
    for dt, b in ((torch.bfloat16, None), (torch.float16, rowmajor(512, 512, torch.float16).T)):
        for e in gemm.EPILOGUES:
            assert gplan(512, 512, 512, dt, b=b, epi=e).kernel in names
    assert gplan(512, 512, 512, tf32=True, b=rowmajor(512, 512).T).kernel in names


def test_hopper_small_outputs_split_k_between_the_warpgroups():
    """Where the table would take 128 x 64 tiles, or split K into no more CTAs than 64 x 128
    tiles make, and no single 128 x 64 tile per CTA (below), past a wave of 64 x 64 tiles (above):
    64 x 128 tiles, the two consumer warpgroups over halves of every k-tile, one CTA per tile;
    not past that, nor for the swapped TF32 kernel; overrides."""
    p = gplan(1024, 2048, 1024, torch.bfloat16)  # 32 k-tiles
    assert p.ksplit and p.kernel == "gemm_wgmma_ksplit<bf16, true, 128, EpiNone>"
    assert (p.tile, p.grid, p.cluster, p.persistent, p.slices, p.tma_store) == (
        (64, 128),
        (128, 1, 1),
        1,
        False,
        1,
        True,
    )
    assert "K split between the warpgroups" in str(p)
    p = gplan(64, 3000, 4800, torch.bfloat16, epi="EpiBiasReluScale")  # 64 rows: no 128-row tile
    assert p.ksplit and p.grid == (38, 1, 1) and p.kernel == "gemm_wgmma_ksplit<bf16, true, 128, EpiBiasReluScale>"
    assert gplan(768, 1024, 1024, tf32=True, b=rowmajor(1024, 1024).T).ksplit  # 32 k-tiles: split-K's CTAs lose
    assert not gplan(64, 8192, 256, torch.bfloat16).ksplit  # 2 tiles split in 16: 128 k-tiles
    assert not gplan(128, 4096, 1024, torch.bfloat16).ksplit  # 64 k-tiles, 16 CTAs against 64
    assert not gplan(2048, 1024, 1024, torch.bfloat16).ksplit  # a wave of 128 x 128 tiles
    assert gplan(1024, 1024, 1024, tf32=True).swap  # TF32 with a row-major b: swapped
    p = gplan(1024, 1024, 1024, tf32=True, b=rowmajor(1024, 1024).T, epi="EpiBiasReluScale")
    assert p.ksplit and p.kernel == "gemm_wgmma_ksplit<float, false, 128, EpiBiasReluScale>"
    p = gplan(1024, 1024, 1024, tf32=True, ksplit=True)  # asked: b transposed, not swapped
    assert p.ksplit and not p.swap and p.b.prep == "transpose"
    assert gplan(1024, 1024, 1024, torch.bfloat16, ksplit=True).ksplit  # asked, where the table takes single tiles
    assert not gplan(1024, 1024, 1024, torch.bfloat16, tile_n=64).ksplit  # an override of the table: the table's kernel
    assert gplan(4096, 4096, 4096, torch.bfloat16, ksplit=True).grid == (64 * 32, 1, 1)
    with pytest.raises(ValueError, match=r"ksplit=True takes tile_n 64 or 128 and no cluster or .*cluster=1"):
        gplan(1024, 1024, 1024, torch.bfloat16, ksplit=True, cluster=1)
    with pytest.raises(ValueError, match=r"ksplit=True takes tile_n 64 or 128 .* got tile_n=256"):
        gplan(1024, 1024, 1024, torch.bfloat16, ksplit=True, tile_n=256)
    with pytest.raises(ValueError, match=r"swap=True with ksplit=True"):
        gplan(1024, 1024, 1024, tf32=True, ksplit=True, swap=True)


def test_hopper_small_16_bit_outputs_take_one_128_x_64_tile_per_cta():
    """Where the table would split K between the warpgroups, 16-bit outputs of more than 64
    rows with at most WG_SINGLE_MAX_KTILES k-tiles take the plain kernel's 128 x 64 tiles, one
    per CTA, the epilogue staged in the ring (gemm_wgmma_single, the K-splitting kernel's
    shared memory); TF32, 64 rows or longer K keep the K split; overrides."""
    assert gemm.tables.WG_SINGLE_MAX_KTILES == 24
    p = gplan(1024, 1024, 1024, torch.bfloat16)
    assert p.single and not p.ksplit and p.kernel == "gemm_wgmma_single<bf16, true, 64, EpiNone>"
    assert (p.tile, p.grid, p.cluster, p.persistent, p.slices, p.tma_store, p.smem) == (
        (128, 64),
        (128, 1, 1),
        1,
        False,
        1,
        True,
        gemm.geometry.WG_KSPLIT_SMEM_BYTES,
    )
    assert "one tile per CTA, epilogue staged in the ring" in str(p)
    p = gplan(600, 1024, 1024, torch.float16, b=rowmajor(1024, 1024, torch.float16).T, epi="EpiBiasReluScale")
    assert p.single and p.grid == (80, 1, 1) and p.kernel == "gemm_wgmma_single<f16, false, 64, EpiBiasReluScale>"
    assert gplan(1024, 1536, 1024, torch.bfloat16).single  # 24 k-tiles
    assert not gplan(1024, 1600, 1024, torch.bfloat16).single  # 25: the K split
    assert not gplan(64, 1024, 4352, torch.bfloat16).single  # 64 rows: the K split's 64-row tiles
    assert gplan(65, 1024, 4352, torch.bfloat16).single  # (136 tiles of 64 x 64: past a wave)
    assert not gplan(1024, 1024, 1024, tf32=True, b=rowmajor(1024, 1024).T).single  # TF32: the K split
    assert not gplan(2048, 1024, 1024, torch.bfloat16).single  # a wave of 128 x 128 tiles
    assert not gplan(1024, 1024, 1024, torch.bfloat16, ksplit=False).single  # no small-output kernel: 128 x 64 tiles
    assert not gplan(1024, 1024, 1024, torch.bfloat16, single=False).single
    p = gplan(4096, 8192, 4096, torch.bfloat16, single=True)  # asked: one CTA per tile anywhere
    assert p.single and p.grid == (32 * 64, 1, 1)
    for kw, named in (
        (dict(tile_n=64), "tile_n=64"),
        (dict(cluster=1), "cluster=1"),
        (dict(persistent=False), "persistent=False"),
        (dict(ksplit=True), "ksplit=True"),
    ):
        with pytest.raises(
            ValueError,
            match=r"single=True takes 16-bit operands and no tile_n, cluster, persistent "
            rf"or ksplit=True override .* got torch.bfloat16, {named}$",
        ):
            gplan(1024, 1024, 1024, torch.bfloat16, single=True, **kw)
    with pytest.raises(ValueError, match=r"single=True takes 16-bit operands .* got torch.float32"):
        gplan(1024, 1024, 1024, tf32=True, b=rowmajor(1024, 1024).T, single=True)


def test_hopper_tf32_with_a_row_major_b_swaps_the_operands():
    """TF32 reads shared memory K-major only: a row-major b (matmul's) is taken as C^T =
    B^T A^T (B^T through the wgmma's registers) where B's and C's rows are 16-byte aligned, with
    C^T's geometry; small outputs of a long K split K by the batched swapped kernel, others
    unsplit (128x64 tiles below half a wave, unless a cluster is asked for); elsewhere, or asked,
    b is transposed."""
    p = gplan(4096, 4096, 4096, tf32=True)
    assert p.swap and p.kernel == "gemm_wgmma_swap<256, 2, EpiNone>" and (p.a.prep, p.b.prep) == ("as is", "n-major")
    assert p.tma_store and p.slices == 1 and p.b.ld == 4096 and "C^T = B^T A^T" in str(p)
    p = gplan(1024, 4096, 8192, tf32=True)  # C^T: 8192 x 1024, 64 x 4 wide tiles
    assert (p.tile, p.cluster, p.persistent, p.grid) == ((128, 256), 2, True, (132, 1, 1))  # C^T's pairs
    assert gplan(8192, 4096, 1024, tf32=True, swap=False).grid == (132, 1, 1)  # C's geometry would be the same
    assert gplan(1024, 1024, 1024, tf32=True).kernel == "gemm_wgmma_swap<64, 1, EpiNone>"
    w = rowmajor(8192, 8192)  # linear's weight.T of a column-major weight
    assert (
        gplan(1024, 8192, 8192, b=w, epi="EpiBiasReluScale", tf32=True).kernel
        == "gemm_wgmma_swap<256, 2, EpiBiasReluScale>"
    )
    for b in (rowmajor(4096, 4096, aligned=False), Matrix(4096, 4096, 4097, 1, 4, True)):  # B's rows off 16 bytes
        assert not gplan(4096, 4096, 4096, b=b, tf32=True).swap
    p = gplan(4096, 4096, 4094, tf32=True)  # C's rows off 16 bytes
    assert not p.swap and p.b.prep == "transpose" and p.kernel == "gemm_wgmma<float, false, 256, 2, EpiNone>"
    # C^T's 16 tiles, 128 k-tiles: K split by the batched swapped kernel, 8 slices of K its entries
    p = gplan(256, 4096, 1024, tf32=True)
    assert p.swap and (p.slices, p.kslice) == (8, 512) and not p.ksplit and p.b.prep == "n-major"
    assert p.kernel == "gemm_wgmma_batched_swap<128, EpiNone>" and p.reduce == "gemm_splitk_reduce<float, EpiNone>"
    assert p.grid == (128, 1, 1) and p.batch == 0 and "split-K 8 x 512" in str(p)
    assert gplan(128, 4096, 1024, tf32=True).slices == 16
    assert gplan(128, 4092, 1024, tf32=True).slices == 11  # equal slices of a multiple of 4 values
    # K under 96 k-tiles, two slices, an override, or no equal slices: unsplit, 64-wide below half a wave
    for M, K, N, kw in (
        (256, 3040, 1024, {}),
        (512, 512, 512, {}),
        (256, 4096, 1024, dict(split_k=False)),
        (128, 4093, 1024, {}),
        (1024, 4096, 1024, {}),
    ):
        p = gplan(M, K, N, tf32=True, **kw)
        assert (p.kernel, p.slices) == ("gemm_wgmma_swap<64, 1, EpiNone>", 1), (M, K, N, kw)
    assert gplan(256, 4096, 1024, tf32=True, tile_n=128, split_k=False).kernel == "gemm_wgmma_swap<128, 1, EpiNone>"
    assert gplan(256, 4096, 1024, tf32=True, tile_n=256).kernel == "gemm_wgmma_swap<256, 1, EpiNone>"
    assert gplan(512, 512, 4096, tf32=True).tile == (128, 128)  # C^T's 128 tiles: a wave
    assert gplan(256, 4096, 1024, tf32=True, cluster=2).kernel == "gemm_wgmma_swap<128, 2, EpiNone>"  # pairs: 128
    # the unswapped kernels keep their tiles without split-K (the K-splitting warpgroups' rule)
    assert gplan(64, 256, 128, torch.bfloat16, split_k=False).tile == gplan(64, 256, 128, torch.bfloat16).tile
    p = gplan(256, 1024, 1024, tf32=True, swap=False)  # asked: transposed (and the K-splitting warpgroups)
    assert not p.swap and p.b.prep == "transpose" and p.ksplit
    p = gplan(256, 1024, 1024, tf32=True, swap=False, ksplit=False)
    assert not p.swap and p.slices > 1 and p.b.prep == "transpose"
    assert not gplan(4096, 4096, 4096, tf32=True, swap=False).swap
    assert not gplan(4096, 4096, 4096, tf32=True, tma_store=False).swap  # the threads' stores: transpose
    assert not gplan(4096, 4096, 4096, torch.bfloat16).swap  # 16-bit: the transpose bit
    padded = Matrix(4096, 4094, 4096, 1, 4, True)  # b's rows 16 bytes apart, N = 4094:
    assert not gplan(4096, 4096, 4094, b=padded, tf32=True).swap  # wgmma's TMA stores need C's rows so too,
    assert gplan(4096, 4096, 4094, b=padded, algo="tf32x3").swap  # tf32x3 stores C with its threads
    with pytest.raises(ValueError, match=r"swap=True needs float32 operands, a row-major b .*N = 4094"):
        gplan(4096, 4096, 4094, tf32=True, swap=True)
    with pytest.raises(ValueError, match=r"swap=True needs float32 .*got torch.bfloat16"):
        gplan(4096, 4096, 4096, torch.bfloat16, swap=True)
    with pytest.raises(ValueError, match=r"swap=True with tma_store=False"):
        gplan(4096, 4096, 4096, tf32=True, swap=True, tma_store=False)


# (tile width, CTAs per cluster, persistent): every compiled Hopper variant, both grid kinds
WGMMA_VARIANTS = [
    (64, 1, False),
    (64, 1, True),
    (128, 1, False),
    (128, 2, True),
    (128, 2, False),
    (256, 1, False),
    (256, 1, True),
    (256, 2, True),
]


def wgmma_cases(shapes, dtype, cuda):
    """(M, K, N, a, b) for each shape: seeded randn operands of ``dtype`` (skips without a
    Hopper GPU)."""
    require_algo("wgmma")
    torch.manual_seed(0)
    for M, K, N in shapes:
        yield M, K, N, torch.randn(M, K, device=cuda).to(dtype), torch.randn(K, N, device=cuda).to(dtype)


@pytest.mark.parametrize("bn, cluster, persistent", WGMMA_VARIANTS, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_wgmma_every_tile_width_and_cluster(bn, cluster, persistent, dtype, cuda):
    """Each compiled variant of the Hopper kernel, whatever the shape tables would pick: tails
    in M, N and K, row-major (N-major) and K-major b, the fused epilogue; an odd number of tile
    rows (a cluster's second CTA past M) and a single one; a persistent grid that walks
    several tiles per cluster (4100 x 4100: 33 x 17 wide tiles for 132 SMs; 2100 x 4100: 17 x
    17) whose tiles have one k-tile (K = 40: the ring's stages and phases step once a tile),
    two or several (K = 130)."""
    kw = dict(algo="wgmma", tile_n=bn, split_k=False, cluster=cluster, persistent=persistent)
    shapes = [(300, 200, 520), (129, 64, 256), (8, 1000, 24), (4100, 72, 4100), (2100, 40, 4100), (2100, 130, 4100)]
    for _M, K, N, a, b in wgmma_cases(shapes, dtype, cuda):
        for bb in (b, b.t().contiguous().t()):
            got = matmul_planned(a, bb, **kw)
            assert_gemm_close(got, a, bb, operand_roundoff=roundoff("wgmma", dtype))
        bias = torch.randn(N, device=cuda).to(dtype)
        got = linear_planned(a, b.t(), bias, 2.0, **kw)
        ref = torch.relu(a.double() @ b.double() + bias.double()) / 2
        absprod = (a.double().abs() @ b.double().abs() + bias.double().abs()) / 2
        tol = (2 * roundoff("wgmma", dtype) + K * 2.0**-24 * 2) * absprod + 2 * UNIT_ROUNDOFF[dtype] * ref.abs() + 1e-6
        assert ((got.double() - ref).abs() <= tol).all()


@pytest.mark.parametrize("bn, cluster, persistent", WGMMA_VARIANTS, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_wgmma_tma_stores_equal_the_threads_stores(bn, cluster, persistent, dtype, cuda):
    """The epilogue's two store paths write the same bits (same accumulation, same epilogue),
    for plain and fused outputs, and the TMA stores write nothing past M x N: rows and columns
    past the matrix (tails in both, a tile row past M, one row of 16-row boxes partly past M)
    are clipped, and the rows after C in the same allocation keep their sentinel."""
    kw = dict(algo="wgmma", tile_n=bn, split_k=False, cluster=cluster, persistent=persistent)
    shapes = [(300, 200, 520), (129, 64, 264), (8, 1000, 24), (1000, 72, 4104), (2100, 40, 4104)]
    for M, K, N, a, b in wgmma_cases(shapes, dtype, cuda):
        bias = torch.randn(N, device=cuda).to(dtype)
        for epi, bb, extra in (("EpiNone", b, ()), ("EpiBiasReluScale", b.t().contiguous().t(), (bias, 0.5))):
            outs = []
            for tma_store in (True, False):
                p = gemm.plan_for(a, bb, epi, tma_store=tma_store, **kw)
                assert p.tma_store == tma_store
                big = torch.full((M + 40, N), float("nan"), dtype=dtype, device=cuda)
                gemm.run(p, a, bb, big[:M], *extra)
                assert big[M:].isnan().all(), f"stores past row {M} ({p})"
                outs.append(big[:M])
            assert torch.equal(outs[0], outs[1]), f"{epi} M={M} K={K} N={N}"
            if epi == "EpiNone":
                assert_gemm_close(outs[0], a, bb, operand_roundoff=roundoff("wgmma", dtype))


@pytest.mark.parametrize("bn, cluster, persistent", WGMMA_VARIANTS, ids=str)
def test_wgmma_swapped_tf32_every_variant(bn, cluster, persistent, cuda):
    """TF32 with a row-major b computed as C^T = B^T A^T (B^T through the wgmma's registers, C
    stored transposed by the TMA), each compiled variant: against the bound and against the
    transpose pass's result; tails in M, N (a multiple of 4: C's rows a TMA pitch) and K; one
    row, one tile row, a cluster's second CTA past N, a persistent walk over several tiles;
    b with rows offset (b[1:]) or wider apart than N; the fused epilogue (a column-major
    weight); nothing stored past M x N (the rows after C keep their sentinel)."""
    kw = dict(algo="wgmma", tile_n=bn, split_k=False, cluster=cluster, persistent=persistent)
    dtype = torch.float32
    for M, K, N, a, b in wgmma_cases(
        [(300, 200, 520), (129, 64, 256), (8, 1000, 24), (4100, 72, 4100), (1, 33, 4), (257, 31, 132)], dtype, cuda
    ):
        wide = torch.randn(K + 1, N + 12, device=cuda)
        for bb in (b, wide[1:, :N], wide[:K, 4 : N + 4]):
            p = gemm.plan_for(a, bb, "EpiNone", swap=True, **kw)
            assert p.swap and p.kernel == f"gemm_wgmma_swap<{bn}, {cluster}, EpiNone>", p
            big = torch.full((M + 40, N), float("nan"), device=cuda)
            gemm.run(p, a, bb, big[:M])
            assert big[M:].isnan().all(), f"stores past row {M} ({p})"
            assert_gemm_close(big[:M], a, bb, operand_roundoff=roundoff("wgmma", dtype))
            unswapped = matmul_planned(a, bb, swap=False, **kw)
            tol = 4 * K * 2.0**-24 * (a.double().abs() @ bb.double().abs()) + 1e-30
            assert ((big[:M].double() - unswapped.double()).abs() <= tol).all(), "swapped and transposed paths differ"
        bias = torch.randn(N, device=cuda)
        p = gemm.plan_for(a, b, "EpiBiasReluScale", swap=True, **kw)  # linear's b = weight.T = b: row-major
        assert p.swap
        got = gemm.run(p, a, b, torch.empty(M, N, device=cuda), bias, 0.5)
        ref = torch.relu(a.double() @ b.double() + bias.double()) / 2
        absprod = (a.double().abs() @ b.double().abs() + bias.double().abs()) / 2
        tol = (2 * roundoff("wgmma", dtype) + K * 2.0**-24 * 2) * absprod + 2 * UNIT_ROUNDOFF[dtype] * ref.abs() + 1e-6
        assert ((got.double() - ref).abs() <= tol).all()


@pytest.mark.gpu
def test_wgmma_swapped_tf32_split_k(cuda):
    """TF32 with a row-major b, a small output and a long K, split by the batched swapped kernel over
    K's slices (each slice an entry of A's and B's 3-D maps and of the workspace's): against the
    bound; slices of partial k-tiles (K = 4092: 11 of 372), tails in M and N, a padded b, a wider
    a (rows ld apart), an M-major a and one off 16 bytes (copied K-major first), the fused
    epilogue by the reduction; the workspace written in its slices only; deterministic, and
    through ``matmul``'s per-signature path the same bits; a TF32 Linear's weight gradient
    (dz^T x: an M-major a) planned so, against torch's."""
    require_algo("wgmma")
    torch.backends.cuda.matmul.allow_tf32, before = True, torch.backends.cuda.matmul.allow_tf32
    try:
        for M, K, N in ((256, 3072, 1024), (200, 4092, 260), (1, 4096, 132), (130, 8192, 4)):
            wide_a, wide_b = torch.randn(M, K + 8, device=cuda), torch.randn(K, N + 12, device=cuda)
            for a, b in (
                (wide_a[:, :K].contiguous(), wide_b[:, :N].contiguous()),
                (wide_a[:, 4 : K + 4], wide_b[:, :N]),
                (wide_a[:, :K].t().contiguous().t(), wide_b[:, :N]),  # M-major a
                (wide_a.flatten()[1 : M * K + 1].view(M, K), wide_b[:, :N]),  # a off 16 bytes
            ):
                p = gemm.plan_for(a, b, "EpiNone")
                assert p.slices > 2 and p.kernel == "gemm_wgmma_batched_swap<128, EpiNone>", p
                c = gemm.run(p, a, b, torch.empty(M, N, device=cuda))
                assert_gemm_close(c, a, b, operand_roundoff=roundoff("wgmma", torch.float32))
                assert torch.equal(cupy_ops.matmul(a, b), c) and torch.equal(cupy_ops.matmul(a, b), c)
            # the kernel stores C^T's partial sums in the workspace's slices, none past them
            a, b = wide_a[:, :K].contiguous(), wide_b[:, :N].contiguous()
            p = gemm.plan_for(a, b, "EpiNone")
            ws = torch.full((p.slices + 1, M, N), float("nan"), device=cuda)
            for step in gemm.wgmma._swap_split_steps(p, a, b, c, gemm.epilogues.NO_ARGS, ws[: p.slices]):
                launch.launch(*step)
            assert ws[p.slices].isnan().all() and not ws[: p.slices].isnan().any(), p
            total = ws[0].clone()
            for z in range(1, p.slices):  # the reduction sums the slices in order
                total += ws[z]
            assert torch.equal(c, total), p
            assert_gemm_close(c, a, b, operand_roundoff=roundoff("wgmma", torch.float32))
            bias = torch.randn(N, device=cuda)
            p = gemm.plan_for(a, b, "EpiBiasReluScale")  # linear's b = weight.T: row-major here
            assert p.slices > 2 and p.reduce == "gemm_splitk_reduce<float, EpiBiasReluScale>", p
            got = gemm.run(p, a, b, torch.empty(M, N, device=cuda), bias, 0.5)
            ref = torch.relu(a.double() @ b.double() + bias.double()) / 2
            absprod = (a.double().abs() @ b.double().abs() + bias.double().abs()) / 2
            tol = (2 * roundoff("wgmma", torch.float32) + K * 2.0**-24 * 2) * absprod + 2 * 2.0**-24 * ref.abs() + 1e-6
            assert ((got.double() - ref).abs() <= tol).all()
        # a Linear's weight gradient dz^T x (rows 8192: a long K) takes the split with an M-major a
        x = torch.randn(8192, 256, device=cuda)
        w = torch.randn(512, 256, device=cuda, requires_grad=True)
        dz = torch.randn(8192, 512, device=cuda)
        assert gemm.plan_for(dz.t(), x, "EpiNone").slices > 2
        cupy_ops.linear(x, w).backward(dz)
        assert_gemm_close(w.grad, dz.t(), x, operand_roundoff=roundoff("wgmma", torch.float32))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def check_one_tile_per_cta(dtype, cuda, kernel, tile, **force):
    """The kernels with one output tile per CTA and their epilogue staged in the ring (``force``:
    the plan override that asks for one; ``kernel``: its name's start; ``tile``: its tile):
    against the bound, both b layouts (a row-major fp32 b is transposed first), the fused
    epilogue, the TMA's and the threads' stores; K of one partial k-tile up to thousands, tails
    in M (a tile partly past M) and N, one row; nothing stored past M (the rows after C keep
    their sentinel); deterministic."""
    for M, K, N, a, b in wgmma_cases(
        [
            (300, 1000, 520),
            (129, 3, 256),
            (1, 64, 8),
            (1024, 1024, 1024),
            (8, 3000, 136),
            (65, 200, 130),
            (127, 4097, 129),
        ],
        dtype,
        cuda,
    ):
        for bb in (b, b.t().contiguous().t()):
            for tma_store in (True, False) if (N * a.element_size()) % 16 == 0 else (False,):
                p = gemm.plan_for(a, bb, "EpiNone", "wgmma", tma_store=tma_store, **force)
                assert p.kernel.startswith(kernel) and p.tile == tile and not p.persistent, p
                big = torch.full((M + 40, N), float("nan"), dtype=dtype, device=cuda)
                gemm.run(p, a, bb, big[:M])
                assert big[M:].isnan().all(), f"stores past row {M} ({p})"
                assert_gemm_close(big[:M], a, bb, operand_roundoff=roundoff("wgmma", dtype))
        bias = torch.randn(N, device=cuda).to(dtype)
        got = linear_planned(a, b.t().contiguous(), bias, 2.0, algo="wgmma", **force)
        ref = torch.relu(a.double() @ b.double() + bias.double()) / 2
        absprod = (a.double().abs() @ b.double().abs() + bias.double().abs()) / 2
        tol = (
            (2 * roundoff("wgmma", dtype) + (K + 1) * 2.0**-24 * 2) * absprod
            + 2 * UNIT_ROUNDOFF[dtype] * ref.abs()
            + 1e-6
        )
        assert ((got.double() - ref).abs() <= tol).all()
    torch.manual_seed(1)
    a = torch.randn(256, 2048, device=cuda).to(dtype)
    b = torch.randn(2048, 512, device=cuda).to(dtype)
    first = matmul_planned(a, b, algo="wgmma", **force)
    assert all(torch.equal(first, matmul_planned(a, b, algo="wgmma", **force)) for _ in range(3))


@pytest.mark.parametrize("width", [64, 128])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_wgmma_ksplit_splits_k_between_the_warpgroups(dtype, width, cuda):
    """64 x 128 and 64 x 64 tiles with the two consumer warpgroups each over half of every
    k-tile, summed in shared memory (gemm_wgmma_ksplit); both widths sum in the same order,
    so their bits agree."""
    check_one_tile_per_cta(dtype, cuda, "gemm_wgmma_ksplit<", (64, width), ksplit=True, tile_n=width)
    for _M, _K, _N, a, b in wgmma_cases([(300, 1000, 520), (65, 200, 130)], dtype, cuda):
        other = matmul_planned(a, b, algo="wgmma", ksplit=True, tile_n=192 - width)
        assert torch.equal(matmul_planned(a, b, algo="wgmma", ksplit=True, tile_n=width), other)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_wgmma_single_stages_its_epilogue_in_the_ring(dtype, cuda):
    """128 x 64 tiles of the plain kernel, one per CTA, the epilogue's buffers in the ring
    (gemm_wgmma_single): the same sums as the plain kernel's 128 x 64 tiles, bit for bit."""
    check_one_tile_per_cta(dtype, cuda, "gemm_wgmma_single<", (128, 64), single=True)
    for _M, _K, _N, a, b in wgmma_cases([(300, 1000, 520), (65, 200, 130)], dtype, cuda):
        plain = matmul_planned(a, b, algo="wgmma", tile_n=64, cluster=1, persistent=False, split_k=False, ksplit=False)
        assert torch.equal(matmul_planned(a, b, algo="wgmma", single=True), plain)


def test_wgmma_swapped_tf32_is_what_auto_runs_and_keeps_specials(cuda):
    """Under torch's TF32 switch, "auto" on Hopper takes the swapped kernel for a row-major b
    (no transpose pass) and the transpose pass where it cannot (N not a multiple of 4, b's
    rows off a 16-byte boundary); NaN, inf and -0.0 come out as torch's TF32 matmul gives them."""
    require_algo("wgmma")
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        a = torch.randn(192, 96, device=cuda)
        b = torch.randn(96, 260, device=cuda)
        assert cupy_ops.gemm_plan(a, b).swap
        assert not cupy_ops.gemm_plan(a, b[:, :257]).swap and not cupy_ops.gemm_plan(a, b[:, 1:257]).swap
        a[3, 5], a[7, :] = float("nan"), 0.0
        b[2, 9], b[:, 11] = float("inf"), -0.0
        a[10, :] = -0.0
        got, want = cupy_ops.matmul(a, b), a @ b
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
        finite = want.isfinite()
        assert torch.equal(got[finite].signbit() & (got[finite] == 0), want[finite].signbit() & (want[finite] == 0))
        assert torch.allclose(got[finite], want[finite], atol=1e-2, rtol=1e-2)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_wgmma_split_k(dtype, cuda):
    """The Hopper kernel's split-K (small outputs, long K: fp32 partial slices summed in
    order, then rounded to the dtype / put through the fused epilogue) against the bound and
    against the unsplit kernel's bound; N-major and K-major b."""
    require_algo("wgmma")
    torch.manual_seed(0)
    M, K, N = 200, 3000, 136
    a = torch.randn(M, K, device=cuda).to(dtype)
    b = torch.randn(K, N, device=cuda).to(dtype)
    bias = torch.randn(N, device=cuda).to(dtype)
    # (TF32 with a row-major b is computed swapped, its K split only past 96 k-tiles: split it transposed here)
    fp32 = {"swap": False} if dtype == torch.float32 else {}
    assert cupy_ops.gemm_plan(a, b.t().contiguous().t(), algo="wgmma").slices > 1
    # split, split in clusters of 2 (a persistent grid over the slices), unsplit
    for kw in (dict(split_k=True), dict(split_k=True, cluster=2, persistent=True), dict(split_k=False)):
        kw = {**kw, **fp32}
        for bb in (b, b.t().contiguous().t()):
            got = matmul_planned(a, bb, algo="wgmma", **kw)
            assert_gemm_close(got, a, bb, operand_roundoff=roundoff("wgmma", dtype))
        lin = linear_planned(a, b.t(), bias, 2.0, algo="wgmma", **kw)
        ref = torch.relu(a.double() @ b.double() + bias.double()) / 2
        absprod = (a.double().abs() @ b.double().abs() + bias.double().abs()) / 2
        tol = (
            (2 * roundoff("wgmma", dtype) + (K + 1) * 2.0**-24 * 1.01) * absprod
            + 2 * UNIT_ROUNDOFF[dtype] * ref.abs()
            + 1e-6
        )
        assert ((lin.double() - ref).abs() <= tol).all()
