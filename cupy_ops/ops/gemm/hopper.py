"""What the Hopper kernels of gemm_wgmma.cuh share: the rule for computing C^T = B^T A^T and a
row-major B's map there (wgmma, tf32x3); the wgmma family's operand maps and runner (grid,
split-K workspace, C's map, arguments packed once per address set)."""

from __future__ import annotations

import torch

from ... import launch, occupancy
from . import geometry, tma
from .common import GemmPlan, Matrix
from .runtime import handle, packed_launcher, prepare, reduce, split_workspace

WGMMA = "wgmma"  # the family whose kernel walks tiles and may store C through the TMA


def swaps(N: int, dtype: torch.dtype, b: Matrix, override: bool | None = None, c_map: bool = True) -> bool:
    """Whether a Hopper kernel computes C^T = B^T A^T (gemm_wgmma_swap, gemm_tf32x3_swap): for
    fp32 / TF32 with a row-major B (matmul's b), whose tiles TF32 wgmmas cannot read from
    shared memory (K-major only) but can take through registers; instead of a transpose pass
    over B. Needs B's rows 16-byte aligned (its tensor map) and, ``c_map`` (the wgmma kernel's
    epilogue stores through the TMA), C's. ``override`` False: the transpose pass (tuning,
    tests); True where impossible: ValueError."""
    possible = (
        dtype == torch.float32
        and b.stride1 == 1
        and b.aligned16
        and (b.stride0 * b.itemsize) % 16 == 0
        and (not c_map or (N * b.itemsize) % 16 == 0)
    )
    if override and not possible:
        raise ValueError(
            f"swap=True needs float32 operands, a row-major b with rows a multiple of 16 bytes apart "
            f"from a 16-byte boundary{' and N a multiple of 4' if c_map else ''}; got {dtype}, b "
            f"strides ({b.stride0}, {b.stride1}), N = {N}"
        )
    return possible and override is not False


def maps(p: GemmPlan, a, b):
    """``(a_map, b_map, keep)``: the TMA maps of the operands (a K-major B tile is loaded in
    ``p.cluster`` parts, one per CTA of a cluster) and
    the prepared operands they point into, which the caller holds until the kernel is launched
    (freed earlier, their memory could be handed out again before the kernel reads it)."""
    M, K = a.shape
    a2 = prepare(a, p.a)
    if p.swap:  # C^T = B^T A^T: A is the kernel's B side, B (row-major) its A side
        return swapped_a_map(p, b), tma.tensor_map(a2, K, M, p.a.ld, p.bk, p.tile[1] // p.cluster), (a2, b)
    b_map, bt = b_side(p, b)
    return tma.tensor_map(a2, K, M, p.a.ld, p.bk, p.tile[0]), b_map, (a2, bt)


def swapped_a_map(p: GemmPlan, b) -> bytes:
    """The kernel's A side where it computes C^T = B^T A^T: B (K, N) row-major in boxes of
    WG_SWAP_BOX x WG_SWAP_BOX (tf32x3 reads its fp32 values unrounded)."""
    K, N = b.shape
    box = geometry.WG_SWAP_BOX
    return tma.tensor_map(b, N, K, p.b.ld, box, box, exact=p.family == "tf32x3")


def b_side(p: GemmPlan, b):
    """``(b_map, b2)``: B's TMA map where the kernel's B is B (not swapped) and the operand it
    points into, which the caller holds until the kernel is launched (as ``maps``)."""
    K, N = b.shape
    if p.b.prep == "n-major":  # boxes of 64 columns (128 bytes) x bk rows of K
        return tma.tensor_map(b, N, K, p.b.ld, 64, p.bk), b
    bt = prepare(b.t(), p.b)
    return tma.tensor_map(bt, K, N, p.b.ld, p.bk, p.tile[1] // p.cluster), bt


NO_MAP = bytes(128)  # the c_map argument when the kernel stores C with its threads (not read)


def c_map(p: GemmPlan, c) -> bytes:
    """The map the wgmma kernel stores C (M, N, contiguous) through: C^T's boxes where it
    computes C^T = B^T A^T, rows of 128 bytes with TMA stores, else ``NO_MAP``."""
    M, N = c.shape
    if p.swap:
        return tma.tensor_map(c, N, M, N, geometry.WG_SWAP_BOX, geometry.WG_SWAP_BOX, exact=True)
    if p.tma_store:
        return tma.tensor_map(c, N, M, N, 128 // c.element_size(), geometry.WG_STORE_ROWS, exact=True)
    return NO_MAP


def wgmma_args(p: GemmPlan, a_map: bytes, b_map: bytes, cm: bytes, K: int, c, epi: tuple) -> tuple:
    """The arguments of the 2-D wgmma kernels (gemm_wgmma, _single, _ksplit; _swap): the maps
    of A, B and C (``c_map``), then the sizes, C's address, the tile walk and the epilogue's."""
    M, N = c.shape
    if p.swap:
        return (a_map, b_map, cm, M, N, K, p.group, *epi)
    return (a_map, b_map, cm, int(p.tma_store), c.data_ptr(), N, M, N, K, p.group, *epi)


def launch_grid(h, p: GemmPlan) -> tuple:
    """The plan's grid, a persistent one lowered to the clusters that run at once (at most the plan's)."""
    if not p.persistent:
        return p.grid
    return (min(p.grid[0], p.cluster * max(occupancy.resident_clusters(h, p.cluster, p.block, p.smem), 1)), 1, 1)


def run_hopper(kernels, p: GemmPlan, a, b, c, epi: tuple) -> None:
    """The wgmma kernels: TMA maps of the operands (``maps``), then ``launch_maps``."""
    a_map, b_map, keep = maps(p, a, b)
    launch_maps(kernels, p, (a_map, b_map), c, a.shape[1], epi)
    del keep  # launched: the stream orders any reuse of this memory after the kernel


def launch_maps(kernels, p: GemmPlan, operand_maps: tuple, c, K: int, epi: tuple) -> None:
    """Plan ``p``'s kernel over the operands' TMA maps (A's and B's), and of C where the plan
    stores it through the TMA; the persistent grid lowered (``launch_grid``); split-K into an
    fp32 workspace that the reduction sums."""
    M, N = c.shape
    h = handle(kernels, p.kernel, c.get_device())
    grid = launch_grid(h, p)
    if p.slices > 1:
        ws = split_workspace(p, c)
        launch.launch(h, grid, p.block, (*operand_maps, ws.data_ptr(), M, N, K, p.kslice, p.group), p.smem, p.cluster)
        reduce(p, ws, c, epi)
    else:
        launch.launch(h, grid, p.block, wgmma_args(p, *operand_maps, c_map(p, c), K, c, epi), p.smem, p.cluster)


def launcher(kernels, p: GemmPlan, device: int):
    """``run_hopper`` of plan ``p`` bound to ``device``: ``fn(a, b, c, epi)``. Where the
    operands are read as they are (b N-major, or K-major as a Linear's ``weight.T``) and there
    is no split-K workspace (a mid-size GEMM's plan),
    the kernel is loaded and the grid lowered once, and the arguments of each (a, b, c, epi)
    set (the three TMA maps among them) are encoded and packed once: a call is the pointers, a
    lookup and the driver's launch (docs/design.md#host-cost). Other plans run ``run_hopper``
    as it is."""
    if p.slices > 1 or p.a.prep != "as is" or p.family != WGMMA or not (p.swap or p.b.prep in ("n-major", "as is")):
        return lambda a, b, c, epi: run_hopper(kernels, p, a, b, c, epi)
    h = handle(kernels, p.kernel, device)

    def args_of(a, b, c, epi):
        a_map, b_map = maps(p, a, b)[:2]
        return wgmma_args(p, a_map, b_map, c_map(p, c), a.shape[1], c, epi)

    return packed_launcher(h, launch_grid(h, p), p.block, p.smem, p.cluster, args_of)
