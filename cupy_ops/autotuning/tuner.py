"""The tuner: ``autotune`` and the ``Autotuned`` kernel it returns, the GPU environment a choice
is cached under, timing, and the winner kept in memory and on disk."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import re
import sys
import threading
import time
import weakref

import torch

from .. import compiler, launch
from ..compiler import cache
from ..device import LIMITS, Limits, capability, device_limits
from ..kernel import Kernel
from ..kernel.arguments import ForeignArray, foreign, pointer_device
from ..kernel.types import template_arg
from .configs import Config, Trial, prune_reason, table

log = logging.getLogger("cupy_ops")
_declared: list = []  # weak references to the autotuned kernels with examples= (warm --tune)


@dataclasses.dataclass(frozen=True)
class Environment:
    """Where tuning happens; all but ``limits`` are part of the disk cache key."""

    gpu: str
    driver: str
    nvrtc: str
    arch: str  # the -arch a launch compiles for (sm_90, or compute_XX past NVRTC)
    limits: Limits | None


def _environment(device: int) -> Environment:
    cupy = compiler.import_cupy()
    arch = compiler.arch_for(*capability(device))
    return Environment(
        torch.cuda.get_device_name(device),
        str(cupy.cuda.runtime.driverGetVersion()),
        ".".join(map(str, compiler.nvrtc.version())),
        arch,
        device_limits(device),
    )


def _time(fns: dict, device: int, runs: int) -> dict:
    """``{index: median ms}`` of the survivors, timed the bench's way, interleaved."""
    from ..timing import time_cuda_interleaved

    with torch.cuda.device(device):  # the events go on the stream the kernels run on
        stats = time_cuda_interleaved(
            fns,
            warmup=3,
            runs=runs,
            rounds=min(5, runs),
            flush_l2=True,
            min_runs=min(5, runs),
            max_seconds=2.0,
            device=torch.device("cuda", device),
        )
    return {i: s.median for i, s in stats.items()}


@dataclasses.dataclass
class Choice:
    """The configuration a shape key launches: ``config`` (``index`` in the list), where it
    came from (``origin``: "timed" now, or "disk": a tuning of an earlier process), and
    ``trials``: one ``Trial.row()`` per configuration."""

    config: Config
    index: int
    origin: str
    trials: list
    key: str

    @property
    def ms(self) -> float | None:
        """The winner's median time in ms."""
        return self.trials[self.index]["ms"]

    def table(self) -> str:
        """What was tried, one row per configuration: registers, spills, shared memory,
        occupancy estimate and time, or why it was pruned; the winner marked."""
        origin = "timed now" if self.origin == "timed" else "from the disk cache (timed by an earlier process)"
        return f"shape key {self.key}, {origin}:\n" + table(self.trials, self.index)


def tuning_problem() -> str | None:
    """None when kernels can be timed here, else why not (tuning needs a CUDA GPU)."""
    if not torch.cuda.is_available():
        return (
            "tuning times kernels on a CUDA GPU and torch.cuda.is_available() is False here; "
            "`python -m cupy_ops compile --arch sm_90 FILE.cu` checks kernels without one"
        )
    return None


def declared() -> list[Autotuned]:
    """The live autotuned kernels that declared ``examples`` (what ``warm --tune`` tunes)."""
    return [a for a in (r() for r in _declared) if a is not None]


class Autotuned:
    """A kernel tuned over configurations; made by ``autotune``. Called like a ``Kernel``
    without ``grid``/``block``/``shared_mem``/``cluster`` (the chosen configuration's)."""

    def __init__(
        self,
        source,
        name: str,
        configs,
        *,
        grid,
        key=None,
        options=(),
        defines=None,
        include_dirs=(),
        signature=None,
        examples=None,
        min_occupancy: float = 1 / 16,
        runs: int = 20,
        progress: bool = True,
        verbose: bool = False,
    ):
        configs = list(configs)
        if not configs or not all(isinstance(c, Config) for c in configs):
            raise TypeError("configs must be a non-empty list of cupy_ops.Config (cupy_ops.configs(...) makes one)")
        if not (callable(grid) or isinstance(grid, (int, tuple))):
            raise TypeError(f"grid must be a callable (config, *args) -> grid, an int or a tuple, got {grid!r}")
        if (
            key is not None
            and not callable(key)
            and not (isinstance(key, (list, tuple)) and all(isinstance(k, str) for k in key))
        ):
            raise TypeError("key must be a list of parameter names or a callable (*args) -> hashable")
        if not 0.0 <= min_occupancy <= 1.0:
            raise ValueError(f"min_occupancy must be in [0, 1], got {min_occupancy}")
        if not isinstance(runs, int) or runs < 1:
            raise ValueError(f"runs must be an int >= 1, got {runs!r}")
        self.name = name
        self.configs = configs
        self._grid, self._key_spec = grid, key
        self._base = dict(
            source=source,
            options=(options,) if isinstance(options, str) else tuple(options),
            defines=dict(defines or {}),
            include_dirs=include_dirs,
            signature=signature,
        )
        self._kernels: dict[int, Kernel] = {}
        self._choices: dict[tuple, Choice] = {}  # by (shape key, device)
        self._lock = threading.Lock()
        self.min_occupancy, self.runs, self.progress, self.verbose = min_occupancy, runs, progress, verbose
        self.timings = 0  # configurations timed by this object: 0 after a disk hit
        self.kernel(0)  # the first configuration's kernel now: errors in the source show here
        self.examples = examples
        if examples is not None:
            if not callable(examples):
                raise TypeError("examples must be a callable returning a list of argument tuples")
            _declared.append(weakref.ref(self))

    def kernel(self, index: int) -> Kernel:
        """The ``Kernel`` of configuration ``index`` (made on first use)."""
        k = self._kernels.get(index)
        if k is None:
            cfg, b = self.configs[index], self._base
            name = self.name
            if cfg.template:
                name = f"{name}<{', '.join(template_arg(a) for a in cfg.template)}>"
            k = self._kernels[index] = Kernel(
                b["source"],
                name,
                options=b["options"] + cfg.options,
                defines={**b["defines"], **cfg.defines},
                include_dirs=b["include_dirs"],
                signature=b["signature"],
            )
        return k

    # --- the shape key ------------------------------------------------------------------

    def key(self, *args) -> str:
        """The shape key of a call with ``args``, as text: by default the shape and dtype of
        each array and the value of each int (floats do not count); ``key=`` names the
        parameters that count, or is a function of the arguments."""
        spec = self._key_spec
        if callable(spec):
            return repr(spec(*args))
        if spec is None:
            chosen = args
        else:
            names = [p[1] for p in self.kernel(0).params]
            missing = [n for n in spec if n not in names]
            if missing:
                raise ValueError(f"key names {missing}, which are not parameters of {self.name} ({', '.join(names)})")
            chosen = [args[names.index(n)] for n in spec if names.index(n) < len(args)]
        parts = []
        for a in chosen:
            if hasattr(a, "shape") and hasattr(a, "dtype"):
                parts.append((tuple(a.shape), str(a.dtype).replace("torch.", "")))
            elif isinstance(a, int) and not isinstance(a, bool):
                parts.append(a)
            elif spec is not None:
                parts.append(repr(a))
        return repr(tuple(parts))

    def _cache_key(self, key: str, env: Environment) -> bytes:
        b = self._base
        text = self.kernel(0)._source.text()
        return cache.key(
            "autotune",
            hashlib.sha256(text.encode()).hexdigest(),
            self.name,
            json.dumps([list(b["options"]), sorted((k, repr(v)) for k, v in b["defines"].items())]),
            "\n".join(c.canonical() for c in self.configs),
            key,
            env.gpu,
            env.driver,
            env.nvrtc,
            env.arch,
        )

    # --- launching -----------------------------------------------------------------------

    def grid_of(self, config: Config, *args):
        return self._grid(config, *args) if callable(self._grid) else self._grid

    def __call__(self, *args, stream=None) -> None:
        """Launch the best configuration for ``args``' shape key (tuning it first, or reading
        an earlier process's choice from disk)."""
        choice = self._choices.get((self.key(*args), _device_of(args)))
        if choice is None:
            choice = self.tune(*args)
            if stream is not None:  # tuning ran (and put the arrays back) on the current stream
                torch.cuda.synchronize(_device_of(args))
        cfg = choice.config
        self.kernel(choice.index)(
            *args,
            grid=self.grid_of(cfg, *args),
            block=cfg.block,
            shared_mem=cfg.shared_mem,
            stream=stream,
            cluster=cfg.cluster,
        )

    def best(self, *args) -> Config:
        """The configuration a call with ``args`` launches (tuned now if not known yet)."""
        choice = self._choices.get((self.key(*args), _device_of(args)))
        return (choice or self.tune(*args)).config

    def report(self, *args) -> str:
        """The table of what was tried for ``args``' shape key (every key tuned so far when no
        arguments are given): each configuration with its registers, spills, shared memory,
        occupancy estimate and time, or why it was pruned."""
        if args:
            choice = self._choices.get((self.key(*args), _device_of(args)))
            return choice.table() if choice else f"{self.name}: shape key {self.key(*args)} not tuned yet"
        return "\n\n".join(c.table() for c in self._choices.values()) or f"{self.name}: nothing tuned yet"

    # --- tuning --------------------------------------------------------------------------

    def tune(self, *args, force: bool = False) -> Choice:
        """Choose the configuration for ``args``' shape key: from the disk cache when an
        earlier process tuned it on this GPU, driver and NVRTC (unless ``force``), else by
        pruning and timing (the kernel runs on ``args`` many times; the arrays at its pointers
        to non-const, which it may write, are copied first and put back after, so the call
        that tunes computes what any other does).
        Raises ``RuntimeError`` when every configuration was pruned or failed."""
        key, device = self.key(*args), _device_of(args)
        with self._lock:  # kept per device too: one process may hold two kinds of GPU
            if not force and (key, device) in self._choices:
                return self._choices[(key, device)]
            env = _environment(device)
            ck = self._cache_key(key, env)
            stored = None if force else cache.read(ck)
            if stored is not None:
                meta = json.loads(stored[0])
                choice = Choice(self.configs[meta["winner"]], meta["winner"], "disk", meta["trials"], key)
                log.info("autotune %s %s: %s from the disk cache", self.name, key, choice.config.label())
            else:
                choice = self._tune(args, key, device, env)
                cache.write(ck, json.dumps({"winner": choice.index, "trials": choice.trials}).encode(), b"")
            self._choices[(key, device)] = choice
        if self.verbose:
            print(choice.table(), file=sys.stderr)
        return choice

    def check(self, arch: str, dtype=None, limits: Limits | None = None, progress=None) -> list[Trial]:
        """Each configuration compiled by NVRTC for ``arch`` (``"sm_90"``) with ptxas' report,
        and pruned or not (``Trial.pruned``) by it, with no GPU and nothing timed: what tuning
        does before it times. ``dtype``: the instantiation of a per-dtype template (default
        float32); ``limits``: the GPU's (default ``LIMITS[arch]``; unknown: only spills and
        failed compiles prune)."""
        limits = limits if limits is not None else LIMITS.get(arch)
        trials = [Trial(c) for c in self.configs]
        for i, t in enumerate(trials):
            k = self.kernel(i)
            key = dtype if dtype is not None or not k._template else torch.float32
            r = compiler.compile_offline(k._source, arch, [k.variant(key).expr])[0]
            t.registers = r.registers
            t.spills = None if r.spill_stores is None else (r.spill_stores, r.spill_loads)
            t.shared_bytes = None if r.registers is None else (r.shared_bytes or 0)
            t.pruned, t.occupancy = prune_reason(r, t.config, limits, self.min_occupancy)
            if progress:
                progress(i + 1, 0, sum(1 for x in trials[: i + 1] if x.pruned))
        return trials

    def _tune(self, args, key: str, device: int, env: Environment) -> Choice:
        # the memory the kernel may write, as it was: tuning launches it many times on it (an
        # accumulating kernel, y += x, would add each run), so it is put back after, byte for
        # byte (no tensor op: no autograd check or version bump on the caller's tensors)
        saved = []
        for dev, ptr, nbytes in writable(self.kernel(0), args):
            copy = _scratch(dev, nbytes)
            launch.memcpy(dev, copy.data_ptr(), ptr, nbytes)
            saved.append((dev, ptr, copy))
        try:
            return self._tune_trials(args, key, device, env)
        finally:
            for dev, ptr, copy in saved:
                launch.memcpy(dev, ptr, copy.data_ptr(), copy.numel())

    def _tune_trials(self, args, key: str, device: int, env: Environment) -> Choice:
        vkey = self.kernel(0).variant_key(*args)
        show = _Progress(self.name, key, len(self.configs)) if self.progress else None
        if env.arch.startswith("sm_"):
            trials = self.check(env.arch, vkey, env.limits, show)
        else:  # PTX for a GPU newer than NVRTC: no ptxas report to prune with
            trials = [Trial(c) for c in self.configs]
        alive = [i for i, t in enumerate(trials) if not t.pruned]
        fns = {}
        for i in alive:
            cfg, k = self.configs[i], self.kernel(i)
            g = self.grid_of(cfg, *args)
            fns[i] = lambda k=k, g=g, cfg=cfg: k(
                *args, grid=g, block=cfg.block, shared_mem=cfg.shared_mem, cluster=cfg.cluster
            )
        for i in list(fns):  # one launch first: compile and load errors are the config's own
            try:
                _first_launch(fns[i])
            except (RuntimeError, ValueError) as exc:
                trials[i].error = str(exc).splitlines()[0][:200]
                del fns[i]
        if fns:
            self.timings += len(fns)
            times = _time(fns, device, self.runs)
            for i, ms in times.items():
                trials[i].ms = ms
        timed = [i for i in fns if trials[i].ms is not None]
        if show:
            show(len(trials), len(timed), sum(1 for t in trials if t.pruned), done=True)
        if not timed:
            why = "; ".join(f"{t.config.label()}: {t.pruned or t.error}" for t in trials)
            raise RuntimeError(f"autotune {self.name} {key}: no configuration left to time ({why})")
        best = min(timed, key=lambda i: trials[i].ms)
        log.info("autotune %s %s: %s (%.4f ms)", self.name, key, self.configs[best].label(), trials[best].ms)
        return Choice(self.configs[best], best, "timed", [t.row() for t in trials], key)

    def warm(self) -> list[Choice]:
        """Tune every argument tuple of ``examples`` (``warm --tune``): a ``Choice`` each."""
        if self.examples is None:
            return []
        return [self.tune(*args) for args in self.examples()]

    def __repr__(self) -> str:
        return f"cupy_ops.autotune({self.name!r}, {len(self.configs)} configurations)"


def pointee_is_const(ctype: str) -> bool:
    """Whether a pointer parameter's C type points at const data (``const float*``, ``float
    const* __restrict__``; not ``float* const``, a const pointer to data it may write)."""
    return "const" in re.findall(r"\w+", ctype.rsplit("*", 1)[0])


def writable(kernel: Kernel, args) -> list[tuple[int, int, int]]:
    """``(device, address, bytes)`` of each array among ``args`` that ``kernel`` may write (at
    pointers to non-const), another library's viewed as a launch views it. An array a launch
    would refuse (not contiguous) is left out: every configuration then fails on it."""
    out = []
    for p, a in zip(kernel._arg_plan(), args):
        if p.kind != "ptr" or a is None or pointee_is_const(p.ctype):
            continue
        if not isinstance(a, torch.Tensor):
            a = foreign(kernel.name, p.name, p.ctype, a)
            if a is None:  # empty: no memory
                continue
            if isinstance(a, ForeignArray):
                shape = a.owner.__cuda_array_interface__["shape"]
                out.append((a.get_device(), a.data_ptr(), math.prod(shape) * a.element_size()))
                continue
        if a.is_cuda and a.is_contiguous() and a.numel():
            out.append((a.get_device(), a.data_ptr(), a.numel() * a.element_size()))
    return out


def _scratch(device: int, nbytes: int) -> torch.Tensor:
    """``nbytes`` bytes of memory on CUDA device ``device``, from torch's allocator."""
    return torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", device))


def _first_launch(fn) -> None:
    fn()
    torch.cuda.synchronize()


def _device_of(args) -> int:
    """The CUDA device of the first array among ``args`` (the one the launches run on)."""
    for a in args:
        get = getattr(a, "get_device", None)
        if get is not None and getattr(a, "is_cuda", False):
            return get()
        if hasattr(a, "__cuda_array_interface__") and not hasattr(a, "__dlpack__"):
            return pointer_device("autotune", "?", a.__cuda_array_interface__["data"][0])
    return torch.cuda.current_device() if torch.cuda.is_available() else 0


class _Progress:
    """One line on stderr while tuning: rewritten in place on a terminal, else printed at the end."""

    def __init__(self, name: str, key: str, total: int):
        self.name, self.key, self.total = name, key, total
        self.tty = sys.stderr.isatty()
        self.t0 = time.perf_counter()

    def __call__(self, checked: int, timed: int, pruned: int, done: bool = False) -> None:
        if not (self.tty or done):
            return
        text = (
            f"cupy_ops autotune {self.name} {self.key}: {checked}/{self.total} configurations checked, "
            f"{pruned} pruned, {timed} timed ({time.perf_counter() - self.t0:.1f} s)"
        )
        sys.stderr.write(("\r" + text + ("\n" if done else "")) if self.tty else text + "\n")
        sys.stderr.flush()


def autotune(
    source,
    name: str,
    configs,
    *,
    grid,
    key=None,
    options=(),
    defines=None,
    include_dirs=(),
    signature=None,
    examples=None,
    min_occupancy: float = 1 / 16,
    runs: int = 20,
    progress: bool = True,
    verbose: bool = False,
) -> Autotuned:
    """A kernel that picks the fastest of ``configs`` per shape key (see the module's text).

    ``source``, ``name``, ``options``, ``defines``, ``include_dirs``, ``signature``: as for
    ``Kernel``; each ``Config`` adds its defines, options and template arguments (``name`` is
    then the template's name). ``grid``: ``grid(config, *args)`` -> the launch's grid (or a
    fixed grid). ``key``: the parameter names whose values make the shape key, or a function
    of the arguments (default: every array's shape and dtype, and every int).
    ``examples``: a function returning argument tuples to tune ahead of time (``python -m
    cupy_ops warm --tune FILE.py``). ``min_occupancy``: the fraction of an SM's warps a
    configuration must keep resident (default 1/16: four warps, one per scheduler of an SM);
    ``runs``: timed runs per configuration; ``progress``: the line on stderr while tuning;
    ``verbose``: print the table of what was tried after tuning.
    Raises ``TypeError``/``ValueError`` for arguments that do not fit, as ``Kernel`` does.
    """
    return Autotuned(
        source,
        name,
        configs,
        grid=grid,
        key=key,
        options=options,
        defines=defines,
        include_dirs=include_dirs,
        signature=signature,
        examples=examples,
        min_occupancy=min_occupancy,
        runs=runs,
        progress=progress,
        verbose=verbose,
    )
