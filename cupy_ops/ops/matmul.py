"""matmul: ``torch.matmul`` for 2-D operands (cuda_src/matmul.cu)."""
from __future__ import annotations

import torch

from .. import launch
from ..kernel import Kernel
from . import _gemm, _tma

NAIVE = Kernel.builtin("matmul.cu", "matmul_naive")
TC = Kernel.builtin("matmul.cu", "matmul_tc", variants=[f"matmul_tc<{n}>" for n in _gemm.TC_NAMES.values()])
WGMMA = Kernel.builtin("matmul_sm90a.cu", "matmul_wgmma", arch="sm_90a", variants=[
    f"matmul_wgmma<{n}, {b}, {bn}>" for n in _gemm.TC_NAMES.values() for b in ("false", "true")
    for bn in _gemm.WG_TILE_NS if n != "float" or b == "false"])
SIMT = Kernel.builtin("matmul.cu", "matmul_simt", variants=[
    f"matmul_simt<{a}, {b}, {kt}>" for a in ("true", "false") for b in ("true", "false") for kt in _gemm.SIMT_KTILES])
SPLITK_REDUCE = Kernel.builtin("matmul.cu", "matmul_splitk_reduce")
WGMMA_PARTIAL = Kernel.builtin("matmul_sm90a.cu", "matmul_wgmma_partial", arch="sm_90a", variants=[
    f"matmul_wgmma_partial<{n}, {b}, 128>" for n in _gemm.TC_NAMES.values() for b in ("false", "true")
    if n != "float" or b == "false"])


def matmul(a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto") -> torch.Tensor:
    """``a @ b`` for 2-D CUDA tensors, accumulating in fp32 (fp64 for float64).

    Args:
        a: (M, K) tensor, float32 / float16 / bfloat16 / float64, any strides (the CUDA-core
           kernels read ``a.t()``, slices and other views in place; the tensor-core kernels
           copy an operand once when its rows are not K-contiguous and 16-byte aligned).
        b: (K, N) tensor of ``a``'s dtype and device, any strides.
        algo: ``"auto"`` (default): the fastest correct kernel for the dtype: tensor cores
            for float16 / bfloat16, and for float32 only where torch allows TF32
            (``torch.backends.cuda.matmul.allow_tf32`` or ``torch.set_float32_matmul_precision``
            not "highest"), else the tiled fp32 CUDA-core kernel (``"simt"``). The tensor-core
            kernel is ``"wgmma"`` (wgmma + TMA) on Hopper, ``"tc"`` (mma.sync) elsewhere; both
            can be asked for by name (``"wgmma"`` on compute capability 9.0 only). ``"naive"``:
            the reference kernel, one thread per output element.
    Returns:
        A contiguous (M, N) tensor of ``a``'s dtype; zeros when K == 0.
    Raises:
        TypeError: an operand is not a tensor, or the dtypes are unsupported or differ.
        ValueError: an operand is not 2-D, K differs, an operand is not on CUDA or they are
            on different devices, ``algo`` is unknown or does not fit the dtype or GPU.
    """
    _gemm.check_matrix("a", a)
    _gemm.check_matrix("b", b, "a", a)
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"inner dimensions differ: a is {tuple(a.shape)} and b is {tuple(b.shape)} "
            f"(a.shape[1] must equal b.shape[0])"
        )
    _gemm.check_algo(algo)
    device = launch.check_cuda("a", a)
    launch.check_same_device("b", b, "a", device)
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    kind = _gemm.choose(algo, a.dtype, M, device)
    if kind == "wgmma" and K > 0:  # (K == 0: no tile to load; the tc kernel writes the zeros)
        _wgmma(a, b, c, device)
        return c
    if kind in ("tc", "wgmma"):
        a, lda = _gemm.tc_operand(a)
        bt, ldb = _gemm.tc_operand(b.t())
        h = TC.handle(f"matmul_tc<{_gemm.TC_NAMES[a.dtype]}>", device)
        grid, block = _gemm.tc_grid(M, N)
        launch.launch(h, grid, block, (a.data_ptr(), lda, bt.data_ptr(), ldb, c.data_ptr(), M, N, K), _gemm.TC_SMEM)
        return c
    if kind == "simt":
        a, a_kmajor, lda, vec_a = _gemm.operand(a, 1)
        b, b_nmajor, ldb, vec_b = _gemm.operand(b, 1)
        h = SIMT.handle(f"matmul_simt<{_gemm.bool_str(a_kmajor)}, {_gemm.bool_str(not b_nmajor)}, {_gemm.SIMT_KTILE}>", device)
        slices, kslice = _gemm.simt_split(M, N, K, device)
        out = c if slices == 1 else torch.empty((slices, M, N), dtype=torch.float32, device=c.device)
        grid, block = _gemm.simt_grid(M, N, slices)
        launch.launch(h, grid, block, (a.data_ptr(), lda, b.data_ptr(), ldb, out.data_ptr(), M, N, K,
                                       int(vec_a) | int(vec_b) << 1, kslice))
        if slices > 1:
            grid, block = _gemm.reduce_grid(M * N)
            launch.launch(SPLITK_REDUCE.handle(torch.float32, device), grid, block,
                          (out.data_ptr(), c.data_ptr(), M * N, slices))
        return c
    grid, block = launch.gemm_naive_grid(M, N)
    h = NAIVE.handle(a.dtype, device)
    launch.launch(h, grid, block, (a.data_ptr(), a.stride(0), a.stride(1), b.data_ptr(), b.stride(0),
                                   b.stride(1), c.data_ptr(), M, N, K))
    return c


def _wgmma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, device: int) -> None:
    """c = a @ b with the Hopper kernel. a is read K-major (copied when it is not, see
    ``_gemm.tc_operand``); a row-major b is read in place (N-major, 16-bit types), any other b
    as (N, K) K-major."""
    (M, K), N = a.shape, b.shape[1]
    bk, bn = _gemm.WG_BK[a.dtype], _gemm.wgmma_tile_n(M, N, device)
    a, lda = _gemm.tc_operand(a)
    a_map = _tma.tensor_map(a, K, M, lda, bk, _gemm.WG_BM)
    n_major = a.dtype != torch.float32 and b.stride(1) == 1 and _tma.usable(b, b.stride(0))
    if n_major:  # boxes of 64 columns (128 bytes) x bk rows of K
        b_map = _tma.tensor_map(b, N, K, b.stride(0), 64, bk)
    else:
        bt, ldb = _gemm.tc_operand(b.t())
        b_map = _tma.tensor_map(bt, K, N, ldb, bk, bn)
    layout = f"{_gemm.TC_NAMES[a.dtype]}, {_gemm.bool_str(n_major)}, {bn}"
    slices, kslice = _gemm.wgmma_split(M, N, K, bn, a.dtype, device)
    if slices > 1:
        ws = wgmma_partial(layout, a_map, b_map, M, N, K, slices, kslice, device)
        grid, block = _gemm.reduce_grid(M * N)
        launch.launch(SPLITK_REDUCE.handle(c.dtype, device), grid, block, (ws.data_ptr(), c.data_ptr(), M * N, slices))
        return
    h = WGMMA.handle(f"matmul_wgmma<{layout}>", device)
    grid, block = _gemm.wgmma_grid(M, N, bn)
    launch.launch(h, grid, block, (a_map, b_map, c.data_ptr(), N, M, N, K), _gemm.wgmma_smem(bn))


def wgmma_partial(layout: str, a_map: bytes, b_map: bytes, M: int, N: int, K: int, slices: int, kslice: int,
                  device: int) -> torch.Tensor:
    """Split-K partial products of the Hopper kernel (``layout``: "T, B_NMAJOR, 128"): returns
    the (slices, M, N) fp32 workspace; the caller sums it with its reduction kernel."""
    ws = torch.empty((slices, M, N), dtype=torch.float32, device=torch.device("cuda", device))
    h = WGMMA_PARTIAL.handle(f"matmul_wgmma_partial<{layout}>", device)
    grid, block = _gemm.wgmma_grid(M, N, 128, slices)
    launch.launch(h, grid, block, (a_map, b_map, ws.data_ptr(), M, N, K, kslice), _gemm.wgmma_smem(128))
    return ws
