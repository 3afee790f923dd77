"""What every GEMM family's planner shares: the plan's inputs (``Matrix``, ``Device``,
``Overrides``), its output (``GemmPlan`` with an ``Operand`` per side) and the operand rules.

Pure: reads shapes, strides, alignment, the dtype and the device's properties, never a tensor,
so a CPU test can plan any problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ...launch import cdiv
from . import geometry
from .epilogues import BUILTIN
from .tables import WG_CLUSTERS, WG_SPLIT_MAX_WAVES, WG_SPLIT_MIN_KTILES

EPILOGUES = BUILTIN  # the built-in epilogue tags, declared for every kernel (gemm_epilogue.cuh)
TENSOR_CORE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@dataclass(frozen=True)
class Matrix:
    """A matrix operand as the plan sees it: shape, element strides, element size and whether
    its first element sits on a 16-byte boundary."""

    rows: int
    cols: int
    stride0: int
    stride1: int
    itemsize: int
    aligned16: bool

    @classmethod
    def of(cls, t: torch.Tensor) -> Matrix:
        return cls(t.shape[0], t.shape[1], t.stride(0), t.stride(1), t.element_size(), t.data_ptr() % 16 == 0)

    @property
    def T(self) -> Matrix:
        return Matrix(self.cols, self.rows, self.stride1, self.stride0, self.itemsize, self.aligned16)


def runs_sm90a(capability: tuple[int, int]) -> bool:
    """sm_90a code (wgmma, TMA, setmaxnreg) runs on compute capability 9.0 exactly."""
    return tuple(capability) == (9, 0)


@dataclass(frozen=True)
class Device:
    """What the plan needs of the GPU: its index, SM count, compute capability and peak memory
    bandwidth in bytes per microsecond (0.0: unknown; the cost model then takes an H100's,
    ``tables.X3_DEFAULT_BANDWIDTH``)."""

    index: int
    sm_count: int
    capability: tuple[int, int]
    bandwidth: float = 0.0

    @property
    def has_wgmma(self) -> bool:
        """The Hopper kernels ("wgmma", "tf32x3", "fp16x3") run here (``runs_sm90a``)."""
        return runs_sm90a(self.capability)


@dataclass(frozen=True)
class Overrides:
    """Overrides of the Hopper kernels' tables, for tuning and tests (all None / True: the
    tables decide).

    ``tile_n`` (64, 128 or 256), ``split_k=False`` (never split K), ``cluster`` (1 or 2),
    ``group`` (>= 1, the tile walk's group height), ``persistent`` (False: one cluster per unit
    of work), ``tma_store`` (False: the threads store C), ``swap`` (fp32 with a row-major b:
    False transposes b first, True computes C^T = B^T A^T even where split-K would be planned;
    tf32x3 with a K-major b: False keeps C where A is split by a pass, True needs that split),
    ``ksplit`` (True: 64 x 128 tiles, or 64 x 64 with ``tile_n=64``, the consumer warpgroups
    over halves of K; False: never)
    and ``single`` (True: 16-bit, one 128 x 64 tile per CTA, its epilogue staged in the ring;
    False: never); ``b_packed`` (True: B's fp16x3 pieces are a prepacked weight's,
    docs/prepack.md: "accurate" weighs fp16x3 without B's split, and fp16x3's plan reads them);
    ``presplit`` (tf32x3: True splits A by a pass first, False never; None: the cost model);
    ``after`` (a user epilogue: True applies it by a pass after the GEMM wherever the plan has no
    split-K reduction, which applies it, False never; None: the cost model).
    Raises ``ValueError`` for a value out of range.
    """

    tile_n: int | None = None
    split_k: bool = True
    cluster: int | None = None
    group: int | None = None
    persistent: bool | None = None
    tma_store: bool | None = None
    swap: bool | None = None
    ksplit: bool | None = None
    single: bool | None = None
    b_packed: bool = False
    presplit: bool | None = None
    after: bool | None = None

    def __post_init__(self):
        if self.tile_n is not None and self.tile_n not in geometry.WG_TILE_NS:
            raise ValueError(f"tile_n must be one of {geometry.WG_TILE_NS}, got {self.tile_n!r}")
        if self.cluster is not None and self.cluster not in WG_CLUSTERS:
            raise ValueError(f"cluster must be one of {WG_CLUSTERS}, got {self.cluster!r}")
        if self.group is not None and (
            not isinstance(self.group, int) or isinstance(self.group, bool) or self.group < 1
        ):
            raise ValueError(f"group must be an int >= 1, got {self.group!r}")

    @property
    def shape(self) -> bool:
        """A tile width, cluster or persistence is overridden (the one-tile kernels take none)."""
        return self.tile_n is not None or self.cluster is not None or self.persistent is not None


NO_OVERRIDES = Overrides()


@dataclass(frozen=True)
class Operand:
    """How one operand reaches the kernel.

    ``prep``: ``"as is"`` (read in place), ``"contiguous copy"`` (row-major copy, SIMT),
    ``"k-major copy"`` / ``"transpose"`` (into K-major rows of 16-byte pitch for the tensor
    cores; ``"transpose"`` by the tiled kernel of transpose.cu), ``"n-major"`` (the Hopper
    kernel reads a row-major B in place through the instruction's transpose bit), ``"n-major
    split"`` (fp16x3: a row-major B split in place into N-major fp16 pieces), ``"prepacked"``
    (fp16x3: B's K-major fp16 pieces held by a prepacked weight).
    ``kmajor``: the kernel reads it K-major; ``ld``: its leading dimension after ``prep``;
    ``vec``: 16-byte loads are allowed (SIMT).
    """

    prep: str
    kmajor: bool
    ld: int
    vec: bool = False


@dataclass(frozen=True)
class GemmPlan:
    """What ``cupy_ops.ops.gemm.run`` launches for one GEMM (see ``cupy_ops.ops.gemm.plan``)."""

    family: str  # the kernel family: "naive", "simt", "tc", "wgmma", "tf32x3", "fp16x3"
    kernel: str  # its name expression (cuda_src/gemm.cu or gemm_sm90a.cu)
    source: str  # "gemm.cu" or "gemm_sm90a.cu"
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    a: Operand
    b: Operand
    tile: tuple[int, int]  # block tile (M, N); (1, 1) for the naive kernel
    slices: int = 1  # split-K: blocks per output tile, each over ``kslice`` of K
    kslice: int = 0
    reduce: str | None = None  # the split-K reduction (applies the epilogue)
    reduce_grid: tuple[int, int, int] = (1, 1, 1)
    bk: int = 0  # Hopper kernel: K per tile (the TMA box)
    cluster: int = 1  # Hopper kernel: CTAs per cluster (2: a pair sharing the B tile)
    group: int = 1  # ... cluster rows per group of its tile walk (WgWalk)
    persistent: bool = False  # ... grid: the clusters that run at once (else one per unit)
    tma_store: bool = False  # ... epilogue: TMA stores of C (C's rows 16-byte aligned)
    swap: bool = False  # Hopper kernels: C^T = B^T A^T (fp32, row-major B): grid, tile and cluster are C^T's
    ksplit: bool = False  # ... the two consumer warpgroups over halves of K (tile WG_KSPLIT_BM x 128)
    single: bool = False  # ... one WG_BM x 64 tile per CTA, the epilogue staged in the ring (more stages)
    batch: int = 0  # a batched kernel's entries (grid z, chunks of MAX_GRID_Z; wgmma: its walk); 0: 2-D
    presplit: bool = False  # tf32x3: A split into TF32 hi and lo by a pass, both loaded by the kernel
    after: str | None = None  # a user epilogue applied by a pass after the GEMM (its tag); the GEMM: the Linear's
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        split = f", split-K {self.slices} x {self.kslice}" if self.slices > 1 else ""
        if self.family == "wgmma":
            split += (
                f", {'persistent, ' if self.persistent else ''}cluster {self.cluster}, group {self.group}, "
                f"{'TMA' if self.tma_store else 'thread'} stores{', C^T = B^T A^T' if self.swap else ''}"
                f"{', K split between the warpgroups' if self.ksplit else ''}"
                f"{', one tile per CTA, epilogue staged in the ring' if self.single else ''}"
            )
        if self.batch:
            split += f", batch of {self.batch} in the grid"
        if self.presplit:
            split += ", A split by a pass first"
        if self.after:
            split += f", epilogue {self.after} by a pass after"
        return (
            f"{self.family}: {self.kernel}, tile {self.tile[0]}x{self.tile[1]}, grid {self.grid}{split}; "
            f"a {self.a.prep}, b {self.b.prep}" + "".join(f"; {n}" for n in self.notes)
        )


def tiled_sizes(M: int, N: int, K: int) -> str | None:
    """Why the tiled kernels (every family but the naive one) cannot take an M x K x N GEMM:
    the row tiles in a grid's y dimension, 32-bit sizes. None: they can."""
    if cdiv(M, geometry.SIMT_TILE) > geometry.MAX_GRID_Y:
        return (
            f"takes at most {geometry.MAX_GRID_Y * geometry.SIMT_TILE} rows (M), got {M}; use 'auto' (it takes "
            f"the naive kernel there) or 'naive'"
        )
    for dim, size in (("N", N), ("K", K)):
        if size > geometry.INT32_MAX:
            return (
                f"takes {dim} up to {geometry.INT32_MAX} (32-bit sizes), got {dim} = {size}; use 'auto' (it takes the "
                f"naive kernel there) or 'naive'"
            )
    return None


def batch_aligned(stride: int, itemsize: int) -> bool:
    """Whether every batch entry of an operand ``stride`` elements apart keeps entry 0's
    16-byte alignment (a broadcast operand, stride 0, does)."""
    return (stride * itemsize) % 16 == 0


def needs_hopper(family: str, dev: Device, instead: str) -> str | None:
    """Why ``family`` (an sm_90a kernel) cannot run on ``dev``; None where it can."""
    if dev.has_wgmma:
        return None
    return (
        f"needs a Hopper GPU (compute capability 9.0); cuda:{dev.index} has "
        f"{'.'.join(map(str, dev.capability))} (use 'auto' or {instead})"
    )


def reduce_grid(n: int) -> tuple[int, int, int]:
    """The grid of gemm_splitk_reduce over ``n`` outputs."""
    return (max(1, min(cdiv(n, geometry.REDUCE_THREADS), geometry.MAX_GRID_Y)), 1, 1)


def kmajor_operand(t: Matrix) -> Operand:
    """A tensor-core operand (rows, K): K contiguous, rows on 16-byte boundaries. Read in
    place when it is already so; a transposed view (K-major rows across memory) goes through
    the tiled transpose kernel (~2.5x faster than torch's copy of the view); any other view is
    copied. Copies pad rows to a multiple of 16 bytes."""
    es = t.itemsize
    ld = t.stride0 if t.rows > 1 else max(t.cols, 1)
    if (t.stride1 == 1 or t.cols == 1) and (ld * es) % 16 == 0 and t.aligned16:
        return Operand("as is", True, ld)
    kp = cdiv(max(t.cols, 1) * es, 16) * 16 // es
    if t.stride0 == 1 and t.rows > 1 and t.cols > 1:
        return Operand("transpose", True, kp)
    return Operand("k-major copy", True, kp)


def n_major_in_place(b: Matrix) -> bool:
    """Whether a Hopper kernel reads B (K, N) N-major in place (16-bit wgmma operands through
    the instruction's transpose bit, fp16x3's pieces split from it): row-major, its rows on
    16-byte boundaries (the TMA's pitch and boxes, fp16x3_split_n's 16-byte loads)."""
    return b.stride1 == 1 and b.aligned16 and (b.stride0 * b.itemsize) % 16 == 0


def split(
    M: int, N: int, K: int, bn: int, bk: int, sm_count: int, max_waves: float = WG_SPLIT_MAX_WAVES
) -> tuple[int, int]:
    """``(slices, kslice)``: split-K of the Hopper families (wgmma, tf32x3, fp16x3) for 128 x 128
    tiles (``bn`` 128) that fill at most
    ``max_waves`` of the SMs; each slice at least WG_SPLIT_MIN_KTILES k-tiles."""
    if bn != 128:
        return 1, K
    tiles = cdiv(M, geometry.WG_BM) * cdiv(N, bn)
    if tiles > max_waves * sm_count:
        return 1, K
    slices = min(sm_count // tiles, K // (WG_SPLIT_MIN_KTILES * bk))
    if slices < 2:
        return 1, K
    kslice = cdiv(cdiv(K, slices), bk) * bk
    return cdiv(K, kslice), kslice
