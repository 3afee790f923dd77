"""The benchmark's cases and what it records of them (``python -m cupy_ops.bench``).

A case is one (problem, dtype, size). Its variants are the cupy_ops kernels (for a GEMM, each
kernel family the GPU runs for the dtype, the one ``"auto"`` picks marked), cuBLAS followed by
``cupy_ops.relu_div`` (level2/63), torch eager and ``torch.compile``. A ``Variant`` says which
it is in explicit fields (``kind``, ``family``, ``auto``, ``fused``); its ``name`` is made from
them, and a results file read back gets them from the name, whose grammar is ``variant_name``'s.
Bytes and FLOPs are counted explicitly (the minimum traffic: each input read once, each output
written once).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

import cupy_ops

from .timing import Stats

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "tf32": torch.float32,
}  # tf32: float32 GEMMs with TF32 allowed (torch and cupy_ops alike)
ELEMENTWISE = ("relu", "relu_div")
GEMM_PROBLEMS = ("matmul", "linear_relu_div")

# (rows, cols) per elementwise size; the last is KernelBench's ReLU size.
ELEMENTWISE_SHAPES = [(1, 4096), (1024, 1024), (1024, 8192), (4096, 16384), (4096, 393216)]
ELEMENTWISE_QUICK = [(1, 4096), (1024, 8192), (4096, 65536)]
# (M, K, N) per GEMM size; the last 2-D one is KernelBench's. (B, M, K, N): a batch, matmul's
# a (B, M, K) @ b (B, K, N) (torch.bmm's work: attention-like, and 4096^3 in 8 products), and
# linear_relu_div's x (B, M, K) (a transformer's activations) with one weight (N, K).
LINEAR_SHAPES = [(256, 1024, 1024), (1024, 8192, 8192), (8, 512, 4096, 4096)]
MATMUL_SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (32, 1024, 128, 1024), (8, 2048, 2048, 2048)]
GEMM_QUICK = [(256, 1024, 1024)]

# Variant kinds
OURS, CUBLAS, EAGER, COMPILED, OTHER = "cupy_ops", "cuBLAS + relu_div", "torch eager", "torch.compile", "other"
CUBLAS_NAME = "cuBLAS + cupy_ops.relu_div"
_OURS_NAME = re.compile(r"cupy_ops(?P<fused> fused)?(?: (?P<family>[a-z0-9]+))?(?P<auto> \(auto\))?")


def variant_name(kind: str, family: str | None = None, auto: bool = False, fused: bool = False) -> str:
    """The name a variant is shown and stored under: "cupy_ops", "cupy_ops wgmma (auto)",
    "cupy_ops fused fp16x3", "cuBLAS + cupy_ops.relu_div", "torch eager", "torch.compile"."""
    if kind == OURS:
        return "cupy_ops" + (" fused" if fused else "") + (f" {family}" if family else "") + (" (auto)" if auto else "")
    return {CUBLAS: CUBLAS_NAME, EAGER: EAGER, COMPILED: COMPILED}[kind]


def variant_fields(name: str) -> dict:
    """``variant_name``'s fields back from a name (a results file stores names only); a name of
    no known kind is ``OTHER``."""
    if name in (EAGER, COMPILED):
        return {"kind": name, "family": None, "auto": False, "fused": False}
    if name == CUBLAS_NAME:
        return {"kind": CUBLAS, "family": None, "auto": False, "fused": False}
    m = _OURS_NAME.fullmatch(name)
    if m is None:
        return {"kind": OTHER, "family": None, "auto": False, "fused": False}
    return {"kind": OURS, "family": m.group("family"), "auto": bool(m.group("auto")), "fused": bool(m.group("fused"))}


@dataclass
class Variant:
    """One timed variant of a case. ``kind``: ``OURS``, ``CUBLAS``, ``EAGER`` or ``COMPILED``
    (``OTHER`` for a name of none); ``family``: a GEMM kernel family ("wgmma", "fp16x3", ...);
    ``auto``: the family ``algo="auto"`` picks; ``fused``: the fused linear layer. Fields left
    at None are read from ``name``."""

    name: str
    stats: Stats | None = None
    max_abs_error: float | None = None
    bitwise_equal: bool | None = None
    error: str | None = None
    kind: str | None = None
    family: str | None = None
    auto: bool | None = None
    fused: bool | None = None

    def __post_init__(self):
        if self.kind is None:
            for key, value in variant_fields(self.name).items():
                if getattr(self, key) is None:
                    setattr(self, key, value)

    @classmethod
    def of(cls, kind: str, family: str | None = None, auto: bool = False, fused: bool = False) -> Variant:
        return cls(variant_name(kind, family, auto, fused), kind=kind, family=family, auto=auto, fused=fused)

    @property
    def ran(self) -> bool:
        return not self.error and self.stats is not None


@dataclass
class Row:
    problem: str
    dtype: str
    shape: str
    bytes: int
    flops: int
    scaled_from: str | None = None
    variants: list[Variant] = field(default_factory=list)
    copy: Stats | None = None

    def get(self, name: str) -> Variant | None:
        return next((v for v in self.variants if v.name == name), None)

    def of_kind(self, kind: str) -> Variant | None:
        """The first variant of ``kind`` (torch eager's, torch.compile's)."""
        return next((v for v in self.variants if v.kind == kind), None)


def _elementwise_case(problem, shape, dtype, device):
    x = torch.randn(shape, device=device, dtype=dtype)
    if problem == "relu":
        ours = [(Variant.of(OURS), lambda: cupy_ops.relu(x))]
        ref = lambda: torch.relu(x)  # noqa: E731
    else:
        ours = [(Variant.of(OURS), lambda: cupy_ops.relu_div(x, 2.0))]
        ref = lambda: torch.relu(x) / 2.0  # noqa: E731
    nbytes = 2 * x.numel() * x.element_size()
    out = torch.empty_like(x)
    return ours, ref, nbytes, 0, (lambda: out.copy_(x))


def gemm_algos(a: torch.Tensor, b: torch.Tensor) -> list[str]:
    """The GEMM kernel families to time for ``a @ b`` (under the current TF32 switch): the one
    "auto" picks first, then every other family this GPU runs for the dtype (the naive
    reference last), as ``cupy_ops.gemm_plan`` says."""
    auto = cupy_ops.gemm_plan(a, b).family
    # the TF32 kernels are timed for float32 only where TF32 is allowed; without it, the
    # fp32-accurate ones: fp16x3 and 3xTF32 (Hopper) and the CUDA-core kernel
    tf32 = a.dtype != torch.float32 or torch.backends.cuda.matmul.allow_tf32
    others = []
    for algo in ("wgmma", "tc", "naive") if tf32 else ("fp16x3", "tf32x3", "simt", "naive"):
        try:
            if algo != auto and cupy_ops.gemm_plan(a, b, algo=algo).family == algo:
                others.append(algo)
        except ValueError:  # this family does not take the dtype or this GPU
            pass
    return [auto, *others]


def _gemm_case(problem, mkn, dtype, device):
    *B, M, K, N = mkn  # B: () or (batch,)
    count = B[0] if B else 1
    if problem == "matmul":
        a = torch.randn(*B, M, K, device=device, dtype=dtype)
        b = torch.randn(*B, K, N, device=device, dtype=dtype)
        ours = [
            (Variant.of(OURS, al, auto=i == 0), lambda al=al: cupy_ops.matmul(a, b, algo=al))
            for i, al in enumerate(gemm_algos(a, b))
        ]
        ref = lambda: torch.matmul(a, b)  # noqa: E731
        nbytes = count * (M * K + K * N + M * N) * a.element_size()
    else:
        x = torch.randn(*B, M, K, device=device, dtype=dtype)
        w = torch.randn(N, K, device=device, dtype=dtype) / K**0.5
        b = torch.randn(N, device=device, dtype=dtype)
        ours = [(Variant.of(CUBLAS), lambda: cupy_ops.relu_div(F.linear(x, w, b), 2.0))]
        ours += [
            (
                Variant.of(OURS, al, auto=i == 0, fused=True),
                lambda al=al: cupy_ops.linear_relu_div(x, w, b, 2.0, algo=al),
            )
            for i, al in enumerate(gemm_algos(x, w.t()))
        ]
        ref = lambda: torch.relu(F.linear(x, w, b)) / 2.0  # noqa: E731
        nbytes = (count * M * K + N * K + N + count * M * N) * x.element_size()
    return ours, ref, nbytes, 2 * count * M * N * K, None


def build_case(problem: str, size: tuple, dtype: torch.dtype, device="cuda"):
    """``(shape text, [(Variant, fn)] of cupy_ops, torch's reference fn, bytes, FLOPs, the copy
    baseline fn or None)`` of one case, its inputs made on ``device``."""
    if problem in ELEMENTWISE:
        ours, ref, nbytes, flops, copy = _elementwise_case(problem, size, dtype, device)
        return f"{size[0]}x{size[1]}", ours, ref, nbytes, flops, copy
    ours, ref, nbytes, flops, copy = _gemm_case(problem, size, dtype, device)
    # a batch of B products: "B*(MxKxN)"
    shape = "x".join(map(str, size[-3:])) if len(size) == 3 else f"{size[0]}*({'x'.join(map(str, size[1:]))})"
    return shape, ours, ref, nbytes, flops, copy


def cases(problems, dtypes, quick: bool):
    """``(problem, dtype name, size)`` of every case of ``problems`` and ``dtypes``."""
    for problem in problems:
        for dname in dtypes:
            if problem in ELEMENTWISE:
                if dname == "tf32":
                    continue
                for shape in ELEMENTWISE_QUICK if quick else ELEMENTWISE_SHAPES:
                    yield problem, dname, shape
            else:
                shapes = GEMM_QUICK if quick else (LINEAR_SHAPES if problem == "linear_relu_div" else MATMUL_SHAPES)
                for mkn in shapes:
                    yield problem, dname, mkn


def fit(problem, size, itemsize):
    """Scale an elementwise size's rows down when GPU memory is short (input, 4 outputs,
    flush): ``(size, the size asked for or None)``."""
    if problem not in ELEMENTWISE:
        return size, None
    rows, cols = size
    free, _ = torch.cuda.mem_get_info()
    per_row = 5 * cols * itemsize
    fits = int((free * 0.85 - 2**29) // per_row)
    if fits >= rows:
        return size, None
    return (max(1, fits), cols), f"{rows}x{cols}"
