"""linear_relu_div: ``torch.relu(F.linear(x, weight, bias)) / divisor`` in one kernel
(cuda_src/linear_relu_div.cu)."""
from __future__ import annotations

import torch

from .. import launch
from ..kernel import Kernel
from . import _divisor, _gemm, _tma
from .matmul import SIMT as MATMUL_SIMT, wgmma_partial

NAIVE = Kernel.builtin("linear_relu_div.cu", "linear_relu_div_naive")
TC = Kernel.builtin("linear_relu_div.cu", "linear_relu_div_tc",
                    variants=[f"linear_relu_div_tc<{n}>" for n in _gemm.TC_NAMES.values()])
WGMMA = Kernel.builtin("linear_relu_div_sm90a.cu", "linear_relu_div_wgmma", arch="sm_90a",
                       variants=[f"linear_relu_div_wgmma<{n}, {bn}>" for n in _gemm.TC_NAMES.values()
                                 for bn in _gemm.WG_TILE_NS])
SPLITK_REDUCE = Kernel.builtin("linear_relu_div.cu", "linear_relu_div_splitk_reduce")
SIMT = Kernel.builtin("linear_relu_div.cu", "linear_relu_div_simt", variants=[
    f"linear_relu_div_simt<{a}, {b}, {kt}>" for a in ("true", "false") for b in ("true", "false") for kt in _gemm.SIMT_KTILES])


def linear_relu_div(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, divisor,
                    *, algo: str = "auto") -> torch.Tensor:
    """``relu(x @ weight.T + bias) / divisor`` with bias, ReLU and divide fused in the epilogue.

    Args:
        x: (M, K) CUDA tensor, float32 / float16 / bfloat16 / float64, any strides.
        weight: (N, K) tensor laid out as ``nn.Linear.weight``, same dtype and device.
        bias: (N,) tensor or None.
        divisor: a real number or a one-element CPU tensor (0, inf, NaN give what torch gives).
        algo: ``"auto"`` (default), ``"wgmma"``, ``"tc"``, ``"simt"`` or ``"naive"``: as for
            ``matmul``.
    Returns:
        A contiguous (M, N) tensor of ``x``'s dtype.
    Raises:
        TypeError: a tensor argument is not a tensor or has a wrong dtype; divisor not a number.
        ValueError: wrong rank or shape, K mismatch, not on CUDA, devices differ, divisor with
            several elements or on the GPU, ``algo`` unknown or not fitting the dtype or GPU.
    """
    _gemm.check_matrix("x", x)
    _gemm.check_matrix("weight", weight, "x", x)
    if x.shape[1] != weight.shape[1]:
        raise ValueError(
            f"in_features differ: x is {tuple(x.shape)} and weight is {tuple(weight.shape)} "
            f"(x.shape[1] must equal weight.shape[1])"
        )
    N = weight.shape[0]
    if bias is not None:
        launch.check_tensor("bias", bias)
        launch.check_same_dtype("bias", bias, "x", x)
        if tuple(bias.shape) != (N,):
            raise ValueError(f"bias must have shape ({N},) to match weight, got {tuple(bias.shape)}")
    _gemm.check_algo(algo)
    device = launch.check_cuda("x", x)
    launch.check_same_device("weight", weight, "x", device)
    if bias is not None:
        launch.check_same_device("bias", bias, "x", device)
    if isinstance(divisor, torch.Tensor) and divisor.is_cuda:
        raise ValueError("divisor must be a number or a CPU tensor for linear_relu_div, got a CUDA tensor")
    scale, _ = _divisor.parse(divisor, x, device)
    M, K = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y
    if bias is not None and bias.stride(0) != 1:
        bias = bias.contiguous()
    kind = _gemm.choose(algo, x.dtype, M, device)
    if kind == "wgmma" and K > 0:  # (K == 0: no tile to load; the tc kernel applies the epilogue to zeros)
        bk, bn = _gemm.WG_BK[x.dtype], _gemm.wgmma_tile_n(M, N, device)
        x, ldx = _gemm.tc_operand(x)
        weight, ldw = _gemm.tc_operand(weight)
        x_map = _tma.tensor_map(x, K, M, ldx, bk, _gemm.WG_BM)
        w_map = _tma.tensor_map(weight, K, N, ldw, bk, bn)
        slices, kslice = _gemm.wgmma_split(M, N, K, bn, x.dtype, device)
        if slices > 1:  # partial products of x @ weight.T (matmul's kernel), then bias/ReLU/scale
            ws = wgmma_partial(f"{_gemm.TC_NAMES[x.dtype]}, false, 128", x_map, w_map, M, N, K, slices, kslice,
                               device)
            _splitk_epilogue(ws, bias, y, slices, scale, device)
            return y
        h = WGMMA.handle(f"linear_relu_div_wgmma<{_gemm.TC_NAMES[x.dtype]}, {bn}>", device)
        grid, block = _gemm.wgmma_grid(M, N, bn)
        launch.launch(h, grid, block, (x_map, w_map, 0 if bias is None else bias.data_ptr(), y.data_ptr(), N,
                                       M, N, K, scale), _gemm.wgmma_smem(bn))
        return y
    if kind in ("tc", "wgmma"):
        x, ldx = _gemm.tc_operand(x)
        weight, ldw = _gemm.tc_operand(weight)
        h = TC.handle(f"linear_relu_div_tc<{_gemm.TC_NAMES[x.dtype]}>", device)
        grid, block = _gemm.tc_grid(M, N)
        launch.launch(h, grid, block, (x.data_ptr(), ldx, weight.data_ptr(), ldw,
                                       0 if bias is None else bias.data_ptr(), y.data_ptr(), M, N, K, scale),
                      _gemm.TC_SMEM)
        return y
    if kind == "simt":
        x, x_kmajor, ldx, vec_x = _gemm.operand(x, 1)
        weight, w_kmajor, ldw, vec_w = _gemm.operand(weight, 1)
        layout = f"{_gemm.bool_str(x_kmajor)}, {_gemm.bool_str(w_kmajor)}, {_gemm.SIMT_KTILE}"
        slices, kslice = _gemm.simt_split(M, N, K, device)
        if slices > 1:  # partial products of x @ weight.T (matmul's kernel), then bias/ReLU/scale
            ws = torch.empty((slices, M, N), dtype=torch.float32, device=x.device)
            grid, block = _gemm.simt_grid(M, N, slices)
            launch.launch(MATMUL_SIMT.handle(f"matmul_simt<{layout}>", device), grid, block,
                          (x.data_ptr(), ldx, weight.data_ptr(), ldw, ws.data_ptr(), M, N, K,
                           int(vec_x) | int(vec_w) << 1, kslice))
            _splitk_epilogue(ws, bias, y, slices, scale, device)
            return y
        h = SIMT.handle(f"linear_relu_div_simt<{layout}>", device)
        grid, block = _gemm.simt_grid(M, N)
        launch.launch(h, grid, block, (x.data_ptr(), ldx, weight.data_ptr(), ldw,
                                       0 if bias is None else bias.data_ptr(), y.data_ptr(), M, N, K,
                                       int(vec_x) | int(vec_w) << 1, scale))
        return y
    grid, block = launch.gemm_naive_grid(M, N)
    h = NAIVE.handle(x.dtype, device)
    launch.launch(h, grid, block, (x.data_ptr(), x.stride(0), x.stride(1), weight.data_ptr(), weight.stride(0),
                                   weight.stride(1), 0 if bias is None else bias.data_ptr(), y.data_ptr(),
                                   M, N, K, scale))
    return y


def _splitk_epilogue(ws: torch.Tensor, bias: torch.Tensor | None, y: torch.Tensor, slices: int, scale: float,
                     device: int) -> None:
    """y = relu(sum of the split-K slices of ws + bias) * scale, in y's dtype."""
    M, N = y.shape
    grid, block = _gemm.reduce_grid(M * N)
    launch.launch(SPLITK_REDUCE.handle(y.dtype, device), grid, block,
                  (ws.data_ptr(), 0 if bias is None else bias.data_ptr(), y.data_ptr(), M, N, slices, scale))
