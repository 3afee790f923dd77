"""An autotuning search space and its pruning: ``Config`` (defines, template arguments, block,
shared memory, options, cluster), ``configs`` (their product), each trial's figures and why it
was pruned, and the table of a tuning."""

from __future__ import annotations

import dataclasses
import itertools
import json

from ..device import Limits, estimated_blocks_per_sm
from ..kernel.arguments import launch_dims, shared_memory
from ..kernel.types import template_arg

_FIELDS = ("block", "defines", "template", "shared_mem", "options", "cluster")


@dataclasses.dataclass(frozen=True)
class Config:
    """One configuration to try: ``block`` (threads, an int or a tuple), ``defines`` (``-D``
    values added to the kernel's), ``template`` (the template arguments of its instantiation,
    as ``Kernel.specialize`` takes them: dtypes, ints, bools or C text), ``shared_mem``
    (dynamic shared memory bytes), ``options`` (NVRTC options added to the kernel's) and
    ``cluster`` (a launch's ``cluster=``). ``cfg["NAME"]`` reads a define."""

    block: int | tuple = 256
    defines: dict = dataclasses.field(default_factory=dict)
    template: tuple = ()
    shared_mem: int = 0
    options: tuple = ()
    cluster: int | tuple | None = None

    def __post_init__(self):
        if not isinstance(self.defines, dict):
            raise TypeError(f"Config.defines must be a dict, got {type(self.defines).__name__}")
        object.__setattr__(
            self, "template", tuple(self.template) if isinstance(self.template, (list, tuple)) else (self.template,)
        )
        object.__setattr__(self, "options", (self.options,) if isinstance(self.options, str) else tuple(self.options))
        launch_dims("block", self.block)
        shared_memory(self.shared_mem)

    def __getitem__(self, name: str):
        try:
            return self.defines[name]
        except KeyError:
            raise KeyError(f"configuration {self.label()} has no define {name!r}") from None

    @property
    def threads(self) -> int:
        """Threads per block."""
        b = self.block if isinstance(self.block, tuple) else (self.block,)
        n = 1
        for d in b:
            n *= d
        return n

    def label(self) -> str:
        """``block=256 ITEMS=4 <float, 4>``: what the report shows."""
        parts = [f"block={self.block}"] + [f"{k}={v}" for k, v in self.defines.items()]
        if self.template:
            parts.append("<" + ", ".join(template_arg(a) for a in self.template) + ">")
        if self.shared_mem:
            parts.append(f"smem={self.shared_mem}")
        if self.options:
            parts.append(" ".join(self.options))
        if self.cluster is not None:
            parts.append(f"cluster={self.cluster}")
        return " ".join(parts)

    def canonical(self) -> str:
        """The configuration as stable text: part of the disk cache key."""
        return json.dumps(
            [
                self.block,
                sorted((k, repr(v)) for k, v in self.defines.items()),
                [template_arg(a) for a in self.template],
                self.shared_mem,
                list(self.options),
                self.cluster,
            ],
            default=list,
        )


def configs(**axes) -> list[Config]:
    """Every combination of the values given per name: ``block``, ``shared_mem``, ``template``,
    ``options`` and ``cluster`` are ``Config`` fields, any other name a define.
    ``configs(block=[128, 256], ITEMS=[1, 4])`` is four configurations. A single value (not a
    list) is the same in all."""
    names = list(axes)
    values = [v if isinstance(v, list) else [v] for v in axes.values()]
    out = []
    for combo in itertools.product(*values):
        fields: dict = {"defines": {}}
        for n, v in zip(names, combo):
            if n in _FIELDS and n != "defines":
                fields[n] = v
            else:
                fields["defines"][n] = v
        out.append(Config(**fields))
    return out


@dataclasses.dataclass
class Trial:
    """What tuning did with one configuration: ptxas' figures, the occupancy estimate, why it
    was pruned (``pruned``) or failed (``error``), else its median time in ms."""

    config: Config
    registers: int | None = None
    spills: tuple | None = None
    shared_bytes: int | None = None
    occupancy: float | None = None
    pruned: str = ""
    error: str = ""
    ms: float | None = None

    def row(self) -> dict:
        return {
            "config": self.config.label(),
            "registers": self.registers,
            "spills": list(self.spills or ()),
            "shared_bytes": self.shared_bytes,
            "occupancy": self.occupancy,
            "pruned": self.pruned,
            "error": self.error,
            "ms": self.ms,
        }


def prune_reason(result, config: Config, limits: Limits | None, min_occupancy: float) -> tuple[str, float | None]:
    """``(why the configuration is pruned or "", its estimated occupancy)`` from ``result``, its
    ``compile_offline`` report: a failed compile, spilled registers, more shared memory than a
    block may have, or fewer resident warps than ``min_occupancy`` of an SM's. Without a ptxas
    report (PTX for a GPU newer than NVRTC) nothing is pruned."""
    if not result.ok:
        first = next((line for line in result.log.splitlines() if "error" in line), result.log.strip()[:200])
        return f"compile failed: {first.strip()}", None
    if result.spill_stores or result.spill_loads:
        return f"spills registers ({result.spill_stores} bytes stored, {result.spill_loads} loaded)", None
    if result.registers is None or limits is None:
        return "", None
    shared = (result.shared_bytes or 0) + config.shared_mem
    if shared > limits.smem_per_block:
        return f"needs {shared} bytes of shared memory, a block may have {limits.smem_per_block}", None
    blocks = estimated_blocks_per_sm(result.registers, config.threads, shared, limits)
    occupancy = blocks * -(-config.threads // 32) * 32 / limits.threads_per_sm
    if blocks == 0:
        return (
            f"no block fits on an SM ({result.registers} registers x {config.threads} threads, {shared} bytes of "
            f"shared memory)"
        ), 0.0
    if occupancy < min_occupancy:
        return f"occupancy {occupancy:.0%} below {min_occupancy:.0%}", occupancy
    return "", occupancy


def table(trials, best: int | None = None) -> str:
    """``trials`` (``Trial`` or their rows) as a text table; ``best``: the row marked."""
    rows = [("configuration", "regs", "spills", "smem", "occ.", "result")]
    for i, r in enumerate(trials):
        r = r.row() if isinstance(r, Trial) else r
        result = (
            f"pruned: {r['pruned']}"
            if r["pruned"]
            else f"error: {r['error']}"
            if r["error"]
            else "kept"
            if r["ms"] is None
            else f"{r['ms']:.4f} ms"
        )
        if i == best:
            result += "  <- best"
        rows.append(
            (
                r["config"],
                "-" if r["registers"] is None else str(r["registers"]),
                "-" if not r["spills"] else "/".join(map(str, r["spills"])),
                "-" if r["shared_bytes"] is None else str(r["shared_bytes"]),
                "-" if r["occupancy"] is None else f"{r['occupancy']:.0%}",
                result,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row[:5], widths)) + "  " + row[5] for row in rows)
