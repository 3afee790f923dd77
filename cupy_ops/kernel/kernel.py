"""``cupy_ops.Kernel``: your own CUDA C kernel, compiled by NVRTC and launched on torch tensors
with the machinery the built-in ops use (they are declared with ``Kernel.builtin``).

    scale = cupy_ops.Kernel('''
    template <class T>
    __global__ void scale(const T* x, T* y, float s, long long n) {
      long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
      if (i < n) y[i] = from_float<T>(to_float(x[i]) * s);
    }''', "scale")
    y = torch.empty_like(x)
    scale(x, y, 2.0, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)

The declaration is read from the source (``compiler.declarations``: any attribute and qualifier
order CUDA accepts, templates, namespaces), so each argument is checked and passed with the right C
type: tensors for pointers (CUDA, contiguous, on one device; arrays of other libraries that speak
DLPack or the CUDA array interface, such as CuPy arrays, are viewed as tensors without a copy, on
the device that holds them), Python numbers for ``float``, ``double``, ``bool`` and the integer
types, each within its C type's range. A ``template <class T>`` kernel is instantiated for float32
(``float``), float16 (``f16``), bfloat16 (``bf16``) and float64 (``double``), the first tensor
passed for a parameter of type ``T*`` picking ``T``; any other instantiation is named by a name
expression (``"tp<float, 4>"``) or made with ``specialize``. ``cuda_src/common.cuh`` is pasted in
before your code: it gives the ``f16``/``bf16`` element types and exact conversions,
``to_float(x[i])`` and ``from_float<T>(v)`` (fp64 stays fp64). The kernel runs on torch's current
stream of the arrays' device, or on ``stream=``; ``cluster=`` and ``cooperative=True`` launch it in
thread-block clusters or with the whole grid resident, ``occupancy`` asks the driver how it fills
the GPU, and ``cupy_ops.autotune`` chooses among its configurations (docs/kernel.md). Each
instantiation compiles on its first launch and is cached per device and on disk (its options,
defines and every header it includes are part of the key); once the last ``Kernel`` object of a
source is gone, its loaded modules are released (after the launches queued from them have finished;
a kernel captured into a CUDA graph stays loaded for the graph's sake)."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import torch

from .. import compiler, launch, occupancy
from ..compiler import declarations
from ..device import BLOCK_MAX, GRID_MAX, SHARED_DEFAULT, Attr, attribute, sm_count, smem_optin
from . import arguments, packing
from .arguments import cluster_shape, stream_handle
from .sources import checked_include_dirs, track
from .types import (
    RANGES,
    base_type,
    find_kernel,
    instantiate,
    layout,
    parse_signature,
    scalar_kind,
    stated_signature,
    template_arg,
)

_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", torch.cuda.is_current_stream_capturing)
_C_NUMBER = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)([fFuUlL]*)")


def c_literal(text: str):
    """A C default argument as Python: ``2.0f`` -> 2.0, ``16u`` -> 16, ``true`` -> True; None
    for anything else (an expression, a name)."""
    t = text.strip()
    if t in ("true", "false"):
        return t == "true"
    m = _C_NUMBER.fullmatch(t)
    if m is None:
        return None
    sign, digits, suffix = m.groups()
    if digits[:2].lower() == "0x":
        return int(sign + digits, 16)
    if len(digits) > 1 and digits[0] == "0" and digits.isdigit():
        return int(sign + digits, 8)  # C's octal: 010 is 8
    if "f" in suffix.lower() or any(c in digits for c in ".eE"):
        return float(sign + digits)
    return int(sign + digits)


GRID_X, BLOCK_X = GRID_MAX[0], BLOCK_MAX[0]


@dataclasses.dataclass(frozen=True)
class Occupancy:
    """``Kernel.occupancy``'s answer for one block shape and shared memory size.

    ``blocks_per_sm``: blocks one multiprocessor holds at once
    (cuOccupancyMaxActiveBlocksPerMultiprocessor; 0: such a block cannot run); ``sms``: the
    device's multiprocessors; ``resident_blocks``: ``blocks_per_sm * sms``, the largest grid
    resident at once (a cooperative launch's limit); ``occupancy``: resident warps over the
    most an SM holds; ``suggested_block`` and ``min_grid``: the block size reaching the
    highest occupancy with this shared memory and the fewest blocks that fill the device with
    it (cuOccupancyMaxPotentialBlockSize); ``clusters``: with ``cluster=``, the clusters
    resident at once (cuOccupancyMaxActiveClusters), else None."""

    blocks_per_sm: int
    sms: int
    resident_blocks: int
    occupancy: float
    suggested_block: int
    min_grid: int
    clusters: int | None = None


class Kernel:
    """A CUDA C kernel from a file or a string, launched on torch tensors.

    Args:
        source: CUDA C code (a string), or the path of a ``.cu`` file (a ``Path``, or a string
            ending in ``.cu``/``.cuh`` without newlines), read now: a file edited later needs a
            new ``Kernel``. Compiled as written: NVRTC's preprocessor looks a quoted
            ``#include`` up next to the file that includes it (your file, or the header), then
            in ``include_dirs`` and ``-I`` folders, then cupy_ops' ``cuda_src/``, then CUDA's
            own headers (``cuda_runtime.h``, ``cuda_fp16.h``, ``cooperative_groups.h``,
            ``mma.h``, ``cuda/std/...``, CUB's device headers) from the wheels the ``cuda12`` /
            ``cuda13`` extra installs. Every header it includes is part of the cache key (an
            edited or upgraded header recompiles); NVRTC's messages name your files and lines.
        name: the ``__global__`` function to launch (qualified with its namespace if another
            kernel has its name), or a name expression of one instantiation of a template
            (``"tp<float, 4>"``). A ``template <class T>`` kernel named alone is instantiated
            for every supported dtype (the tensors pick one).
        options: NVRTC options for every compile of it, at run time and offline
            (``["-lineinfo", "--use_fast_math", "-maxrregcount=64"]``, or one string). Options
            that cannot work here (``-arch``: pass ``arch=``, or let the launch pick the
            device's; ``-rdc=true``, ``-dlto``: output that does not load alone) and options
            NVRTC does not have are a ``ValueError`` naming them.
        defines: ``{"NAME": value}`` -> ``-DNAME=value`` (value an int, float, str, or None
            for ``-DNAME``).
        include_dirs: folders searched for included headers (see ``source``).
        signature: the parameter list, when you want to state it, or when a macro writes the
            kernel's declaration: a C parameter list (``"const float* x, int n"``), or a list
            of kinds (``"ptr"``, ``"i32"``, ``"i64"``, ``"f32"``, ``"f64"``, ``"acc"``) or C
            parameters. Either way it is checked against the compiled kernel's own parameter
            sizes before the first launch.
        arch: an arch-specific target to build for (``"sm_90a"``: wgmma, setmaxnreg;
            ``"sm_100a"``, ``"sm_120a"``, family ``"sm_100f"``), or None for the launching
            device's own. A launch on a device that cannot run the target is a
            ``RuntimeError`` naming both.
    Raises:
        TypeError: an argument of a wrong type.
        ValueError: the kernel is not in the source, a parameter type is not supported, a
            template argument list does not fit the template, an option or define is refused.
        FileNotFoundError: the source file or an include folder does not exist.
    Options, defines, the source and every header it includes are part of the compile cache
    key. Compile errors surface on first call as ``cupy_ops.KernelCompileError`` (a
    RuntimeError) with NVRTC's log; ``compile_offline("sm_90")`` (or ``python -m cupy_ops
    compile PATH.cu``) finds them without a GPU, and ``ptx(arch)`` / ``cubin(arch)`` export
    the compiled code.

    Example:
        >>> axpy = cupy_ops.Kernel('''
        ... extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
        ...   int i = blockIdx.x * blockDim.x + threadIdx.x;
        ...   if (i < n) y[i] = a * x[i] + y[i];
        ... }''', "axpy", options=["-lineinfo"])
        >>> x, y = torch.randn(1000, device="cuda"), torch.zeros(1000, device="cuda")
        >>> axpy(2.0, x, y, 1000, grid=cupy_ops.cdiv(1000, 256), block=256)   # y = 2 x
    """

    def __init__(self, source, name: str, *, options=(), defines=None, include_dirs=(), signature=None, arch=None):
        if not isinstance(name, str):
            raise TypeError(f"name must be the kernel's name or a name expression (a str), got {name!r}")
        name = name.strip()
        try:
            base, targs = declarations.split_name(name)
        except ValueError as exc:
            raise ValueError(f"name: {exc}") from None
        path = None
        if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and source.strip().endswith((".cu", ".cuh"))
        ):
            path = Path(source).resolve()
            if not path.is_file():
                raise FileNotFoundError(f"kernel source {path} not found")
            code, label = path.read_text(encoding="utf-8"), path.name
        elif isinstance(source, str):
            code, label = source, f"<kernel {base}>"
        else:
            raise TypeError(f"source must be CUDA code (str) or a path to a .cu file, got {type(source).__name__}")
        dirs = checked_include_dirs(include_dirs)
        flags = compiler.check_options(options)
        compiler.check_defines(defines)
        arch = compiler.targets.check(arch)
        # common.cuh (f16, bf16, conversions) comes first unless the code includes it itself
        prelude = () if re.search(r'#\s*include\s*"common\.cuh"', code) else ("common.cuh",)
        text = compiler.assemble_user(code, label, path=path, include_dirs=dirs, prelude=prelude)
        try:
            decl = find_kernel(text, base)
        except ValueError:
            if signature is None:
                raise
            decl = None  # the stated parameter list decides
        if decl is None and signature is None:
            raise ValueError(
                f"no `__global__ void {base}(...)` found in the kernel source (if a macro writes its "
                f"declaration, pass signature=)"
            )
        template, exprs, params = instantiate(decl, name, base, targs, strict=signature is None)
        self._stated = None
        if signature is not None:
            # a stated parameter list: its own source entry, so a variant's compiled layout
            # is checked against the list it is launched with
            params = self._stated = stated_signature(name, signature, params if decl is not None else None)
        # compiled as written: NVRTC reads the headers (the pasted text above is only read)
        src = compiler.user(
            code,
            label,
            path=path,
            include_dirs=dirs,
            prelude=prelude,
            defines=defines,
            options=flags,
            arch=arch,
            tag=None if self._stated is None else tuple(self._stated),
        )
        self._declaration = decl
        self._setup(src, name, exprs, template, params)
        track(self, src)

    @classmethod
    def builtin(
        cls,
        filename: str,
        name: str,
        variants,
        *,
        defines=None,
        arch: str | None = None,
        suffix: str = "",
        extended: bool = False,
    ) -> Kernel:
        """A kernel of cupy_ops' own ``cuda_src/filename`` (read on first launch, not at import).

        ``variants``: the instantiations launched, as a list of name expressions (each its own
        key for ``handle``) or a dict ``{key: expression}`` (e.g. ``{torch.float32:
        "relu<float>"}``); they are registered now, for the offline check. ``defines``: ``-D``
        values (the geometry the host decides); ``arch``: the one architecture the file is
        built for (``"sm_90a"``), None for the device's own; ``suffix``: code compiled after the
        file (the GEMM epilogues declared in Python); ``extended``: the suffix holds a user's code
        (``with_suffix``), not the package's own.
        """
        self = cls.__new__(cls)
        exprs = dict(variants) if isinstance(variants, dict) else {v: v for v in variants}
        self._declaration = self._stated = None
        src = compiler.builtin(filename, defines=defines, arch=arch, suffix=suffix, extended=extended)
        self._setup(src, name, exprs, None, None)
        return self

    def with_suffix(self, code: str, variants) -> Kernel:
        """This built-in kernel compiled with ``code`` after its file and its own suffix, for
        ``variants`` (name expressions): instantiations over types the code declares (a user's
        GEMM epilogue)."""
        src = self._source
        return Kernel.builtin(
            src.name,
            self.name,
            variants,
            defines=dict(src.defines),
            arch=src.arch,
            suffix=src.suffix + code,
            extended=True,
        )

    def _setup(self, src, name, exprs, template, params) -> None:
        self.name = name
        self._source = src
        self._variants = {key: src.variant(e) for key, e in exprs.items()}  # registered now
        self._template = template
        self._params = params
        self._signatures: dict = {}
        self._plan = self._fast = None  # the argument plan and its generated packer, on first launch
        self._loaded: dict = {}  # (dtype, device) -> handle: a launch's one lookup
        if params is not None:
            # what the compiled kernels must agree with, checked on each binary NVRTC builds
            for key, v in self._variants.items():
                v.layout = tuple(layout(self._params, key))

    @property
    def params(self) -> list[tuple[str, str, str]]:
        """``[(kind, name, C type)]`` of the kernel's parameters (a built-in file is read now)."""
        if self._params is None:
            self._template, self._params = parse_signature(self._source.text(), self.name)
        return list(self._params)

    @property
    def declaration(self):
        """The kernel's declaration as read from its source (``compiler.declarations``): its
        qualified name, template head, parameters and attributes (``__launch_bounds__``, ...);
        None when ``signature=`` stood in for a declaration not found."""
        if self._declaration is None and self._source.builtin:
            self._declaration = declarations.find(self._source.text(), self.name)
        return self._declaration

    @property
    def expressions(self) -> list[str]:
        """The instantiations this kernel launches (``"scale<float>"``, ... or its name)."""
        return [v.expr for v in self._variants.values()]

    def specialize(self, *args) -> Kernel:
        """The kernel of another instantiation of this template: ``args`` are its template
        arguments, each a torch dtype (its C type: ``f16``, ``bf16``, ``float``, ``int``, ...),
        a bool, an int or C text. ``Kernel(src, "tp<float, 4>").specialize(torch.float64, 8)``
        is ``tp<double, 8>``, compiled from the same source with the same options (each
        instantiation compiles on its own first launch)."""
        if self._source.builtin:
            raise TypeError("specialize is for your own kernels; a built-in kernel's variants are declared with it")
        decl = self.declaration
        if decl is None or decl.template is None:
            raise TypeError(f"kernel {self.name} is not a template: there is nothing to specialize")
        targs = [template_arg(a) for a in args]
        name = f"{decl.qualified}<{', '.join(targs)}>"
        template, exprs, params = instantiate(decl, name, decl.qualified, targs, strict=self._stated is None)
        if self._stated is not None:
            params = self._stated
        new = Kernel.__new__(Kernel)
        new._stated = self._stated
        new._declaration = decl
        new._setup(self._source, name, exprs, template, params)
        track(new, self._source)
        return new

    def compile_offline(self, arch: str) -> list[compiler.OfflineResult]:
        """Compile every instantiation for ``arch`` (``"sm_90"``) with NVRTC, as the first launch
        would, without a GPU: one result per instantiation with its registers, spills and
        shared memory, or NVRTC's log (``ok`` False). ``python -m cupy_ops compile PATH.cu``
        prints these."""
        return compiler.compile_offline(self._source, arch, self.expressions)

    def export(self, arch: str, fmt: str, dtype=None) -> compiler.Export:
        """The compiled code of this kernel for ``arch``, by NVRTC on the CPU (no GPU): ``fmt``
        ``"ptx"`` (``-arch=compute_XX``) or ``"cubin"`` (``-arch=sm_XX``), with the options of a
        launch. One module holds every instantiation (``dtype``: only that one of a per-dtype
        template); ``Export.lowered`` maps each name expression to its symbol in it. Raises
        ``KernelCompileError`` with NVRTC's log."""
        exprs = self.expressions if dtype is None else [self.variant(dtype).expr]
        return compiler.export(self._source, arch, exprs, fmt)

    def ptx(self, arch: str, dtype=None) -> str:
        """The PTX of this kernel for ``arch`` (``"sm_90"`` or ``"compute_90"``): ``export``'s."""
        return self.export(arch, "ptx", dtype).image

    def cubin(self, arch: str, dtype=None) -> bytes:
        """The cubin of this kernel for ``arch`` (``"sm_90"``): ``export``'s."""
        return self.export(arch, "cubin", dtype).image

    def variant(self, key) -> compiler.Variant:
        """The registered variant of ``key`` (a dtype, or an instantiation expression)."""
        v = self._variants.get(key)
        if v is None:
            raise TypeError(f"kernel {self.name} has no instantiation for {key}")
        return v

    def handle(self, key, device: int) -> launch.KernelHandle:
        """The launchable kernel of variant ``key`` on CUDA device ``device`` (compiled on first use)."""
        v = self.variant(key)
        h = launch.handles.get((v, device))
        if h is None:
            sig = self._signatures.get(key)
            if sig is None:
                sig = self._signatures[key] = tuple(scalar_kind(k, key) for k, _, _ in self.params)
            h = launch.handle(v, device, sig)
        self._loaded[(key, device)] = h
        return h

    def _arg_plan(self) -> list[tuple]:
        """What a launch checks of each argument (``arguments.plan``), read once."""
        plan = self._plan
        if plan is None:
            plan = self._plan = packing.plan(self.params, self._template)
            self._fast = packing.fast(plan, self._template)
        return plan

    def _with_defaults(self, args: tuple, plan) -> tuple:
        """``args`` and the default arguments of the parameters after them, as a ``<<<...>>>``
        launch takes them (each a number, ``true`` or ``false``); else the count's TypeError."""
        names = ", ".join(p[1] for p in plan)
        wrong = f"kernel {self.name}({names}) takes {len(plan)} arguments, got {len(args)}"
        decl = self._declaration
        if (
            decl is None
            or getattr(self, "_stated", None) is not None
            or len(args) > len(plan)
            or len(decl.params) != len(plan)
        ):
            raise TypeError(wrong)
        rest = decl.params[len(args) :]
        if any(p.default is None for p in rest):
            raise TypeError(wrong)
        values = [c_literal(p.default) for p in rest]
        for i, (p, v) in enumerate(zip(rest, values)):
            lo, hi, is_bool = RANGES.get(base_type(p.ctype), (None, None, False))
            if type(v) is int and lo == 0 and not p.pointer:
                # C's conversions: to bool, nonzero is true; to an unsigned type, modulo 2^bits (-1 its largest)
                values[i] = bool(v) if is_bool else v % (hi + 1)
            if v is None:
                raise TypeError(
                    f"{wrong}: the default of {p.name or 'a parameter'} ({p.default}) is no number: pass it"
                )
        return args + tuple(values)

    def __call__(
        self, *args, grid, block, shared_mem: int = 0, stream=None, cluster=None, cooperative: bool = False
    ) -> None:
        """Launch with ``args`` (one per kernel parameter) on torch's current stream of the
        arrays' device.

        ``grid``/``block``: an int or a tuple of up to 3 ints, within CUDA's limits; a grid
        with a zero dimension launches nothing. ``shared_mem``: bytes of dynamic shared
        memory, within the device's limit (past 48 KB the kernel is opted in for it).
        ``stream``: the stream to launch on instead, a ``torch.cuda.Stream``, a CuPy stream,
        an object with ``__cuda_stream__`` or a raw ``cudaStream_t`` (an int); it must be on
        the arrays' device. ``cluster``: thread-block clusters, an int (CTAs along x) or an
        ``(x, y, z)`` tuple dividing the grid, at most 16 CTAs (above 8 the kernel is opted in
        to non-portable sizes; compute capability 9.0 and newer). ``cooperative``: every
        block resident at once, so ``cooperative_groups::this_grid().sync()`` works; a grid
        larger than ``occupancy(block, shared_mem).resident_blocks`` is a ``ValueError``.
        Raises ``TypeError``/``ValueError`` naming the argument that does not fit its
        parameter (a number out of its C type's range included).
        """
        plan = self._plan or self._arg_plan()
        if len(args) != len(plan):
            args = self._with_defaults(args, plan)
        # (an int grid and block, the common form, checked here: a call less each)
        grid3 = (grid, 1, 1) if grid.__class__ is int and 0 < grid <= GRID_X else arguments.launch_dims("grid", grid)
        block3 = (
            (block, 1, 1) if block.__class__ is int and 0 < block <= BLOCK_X else arguments.launch_dims("block", block)
        )
        if shared_mem.__class__ is not int or not 0 <= shared_mem <= SHARED_DEFAULT:
            arguments.shared_memory(shared_mem)
        packed = self._fast(args) if self._fast is not None else None
        device, dtype, values = packed or packing.pack(self.name, plan, args, self._template)
        if shared_mem > SHARED_DEFAULT:
            arguments.shared_memory(shared_mem, smem_optin(device))
        if stream is not None:
            stream = stream_handle(stream, device)
        if cluster is not None:
            cluster = cluster_shape(cluster, grid3)
        if 0 in grid3:
            return
        h = self._loaded.get((dtype, device)) or self.handle(dtype, device)
        if not h.pinned and _capturing():
            h.pinned = True  # a CUDA graph holds this kernel now: never unload its module
        if cooperative:
            self._check_cooperative(h, grid3, block3, shared_mem)
        try:
            if stream is None and cluster is None and not cooperative:
                launch.launch(h, grid3, block3, values, shared_mem)
            else:
                launch.launch(
                    h, grid3, block3, values, shared_mem, cluster or 1, stream=stream, cooperative=bool(cooperative)
                )
        except RuntimeError as exc:  # CuPy's CUDADriverError: e.g. too much shared memory
            raise RuntimeError(
                f"launching kernel {self.name} with grid {grid3}, block {block3} failed: {exc}"
            ) from None

    def _check_cooperative(self, h, grid3, block3, shared_mem: int) -> None:
        """A cooperative grid must be resident at once: at most blocks per SM x SMs blocks."""
        if not attribute(h.device, Attr.COOPERATIVE_LAUNCH):
            raise ValueError(f"cooperative=True: cuda:{h.device} does not support cooperative launches")
        per_sm = occupancy.blocks_per_sm(h, block3, shared_mem)
        most = per_sm * sm_count(h.device)
        blocks = grid3[0] * grid3[1] * grid3[2]
        if blocks > most:
            raise ValueError(
                f"cooperative=True: grid {grid3} has {blocks} blocks, but at most {most} blocks of kernel "
                f"{self.name} (block {block3}, {shared_mem} bytes of dynamic shared memory) are resident "
                f"on cuda:{h.device} at once ({per_sm} per SM); a cooperative grid must all be resident"
            )

    def variant_key(self, *args):
        """The key of the instantiation a launch with ``args`` takes: the dtype of the first
        tensor passed for a ``T*`` parameter of a per-dtype template, else None."""
        if not self._template:
            return None
        for p, a in zip(self._arg_plan(), args):
            if p.picks and a is not None:
                dtype = getattr(a, "dtype", None)
                if dtype is None and hasattr(a, "__cuda_array_interface__"):
                    dtype = arguments.cuda_array_interface(self.name, p.name, p.ctype, a.__cuda_array_interface__)[1]
                if isinstance(dtype, torch.dtype):
                    return dtype
        raise TypeError(
            f"kernel {self.name}: no tensor was passed for a parameter of type {self._template}*, "
            f"so {self._template} is unknown"
        )

    def occupancy(self, block, shared_mem: int = 0, *, dtype=None, device=None, cluster=None) -> Occupancy:
        """How this kernel fills a GPU, as the driver computes it: blocks of ``block`` threads
        (an int or a tuple) with ``shared_mem`` bytes of dynamic shared memory each.

        ``dtype``: the instantiation of a per-dtype template (as ``ptx``/``export`` take it;
        required for one, else not allowed); ``device``: a CUDA device (default the current
        one); ``cluster``: also ask how many such clusters are resident at once. Compiles
        and loads the kernel on ``device``. Returns an ``Occupancy``. Raises ``TypeError``
        for a missing ``dtype``, ``ValueError`` for a block or shared memory out of range.
        """
        if self._template and dtype is None:
            raise TypeError(f"kernel {self.name} is instantiated per dtype: pass dtype= (e.g. torch.float32)")
        if not self._template and dtype is not None:
            raise TypeError(f"kernel {self.name} has one instantiation ({self.expressions[0]}): dtype= picks none")
        block3 = arguments.launch_dims("block", block)
        arguments.shared_memory(shared_mem)
        if device is not None:
            device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
            if device.type != "cuda":
                raise ValueError(f"device must be a CUDA device, got {device}")
            device = device.index
        if device is None:
            device = torch.cuda.current_device()
        if shared_mem > SHARED_DEFAULT:
            arguments.shared_memory(shared_mem, smem_optin(device))
        h = self.handle(dtype, device)
        per_sm = occupancy.blocks_per_sm(h, block3, shared_mem)
        sms = sm_count(device)
        threads = block3[0] * block3[1] * block3[2]
        warps = -(-threads // 32) * per_sm
        max_warps = attribute(device, Attr.THREADS_PER_SM) // 32
        suggested, min_grid = occupancy.suggested_block(h, shared_mem)
        clusters = None
        if cluster is not None:
            clusters = occupancy.resident_clusters(
                h, launch.cluster_dims(cluster_shape(cluster, None)), block3, shared_mem
            )
        return Occupancy(
            per_sm, sms, per_sm * sms, warps / max_warps if max_warps else 0.0, suggested, min_grid, clusters
        )

    def __repr__(self) -> str:
        return f"cupy_ops.Kernel({getattr(self, 'name', '?')!r}, source={getattr(self, '_source', None)!r})"
