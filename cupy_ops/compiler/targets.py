"""Compile targets: what ``sm_90``, ``sm_90a``, ``sm_100f`` and ``compute_90`` mean, and which
devices can run code built for each.

- ``sm_XY``: a cubin for compute capability X.Y; it runs on X.Z for Z >= Y (same major).
- ``sm_XYa``: arch-specific (Hopper's wgmma and setmaxnreg, Blackwell's tcgen05): runs on X.Y only.
- ``sm_XYf``: family-specific (CUDA 12.9+): runs on X.Z for Z >= Y (same major).
- ``compute_XY``: PTX, which the driver compiles for any device of X.Y or newer.

Pure functions of strings: no NVRTC here (``nvrtc.supports`` asks NVRTC what it can build).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TARGET = re.compile(r"(sm|compute)_(\d)(\d{1,2})([af]?)")


@dataclass(frozen=True)
class Target:
    """A parsed target: ``kind`` "sm" (cubin) or "compute" (PTX), compute capability
    ``major``.``minor`` and ``suffix`` "" / "a" / "f"."""

    kind: str
    major: int
    minor: int
    suffix: str

    def __str__(self) -> str:
        return f"{self.kind}_{self.major}{self.minor}{self.suffix}"

    @property
    def cc(self) -> int:
        return self.major * 10 + self.minor


def parse(arch: str) -> Target | None:
    """The ``Target`` of ``arch`` (``"sm_90a"``), or None when it is not one. Compute
    capability 10.0 is written ``sm_100``: the last digit is the minor one."""
    m = _TARGET.fullmatch(arch) if isinstance(arch, str) else None
    if m is None:
        return None
    kind, major, minor, suffix = m.groups()
    major, minor = int(major + minor[:-1]), int(minor[-1])
    return Target(kind, major, minor, suffix)


def check(arch, what: str = "arch", *, ptx: bool = False) -> str | None:
    """``arch`` checked: None, or a cubin target ``sm_XY`` / ``sm_XYa`` / ``sm_XYf`` (and
    ``compute_XY`` where ``ptx``). Raises ``TypeError`` / ``ValueError`` naming ``what``."""
    if arch is None:
        return None
    if not isinstance(arch, str):
        raise TypeError(
            f"{what} must be a target such as 'sm_90' or 'sm_90a' (a str) or None, got {type(arch).__name__}"
        )
    t = parse(arch.strip())
    if t is None or (t.kind == "compute" and not ptx):
        raise ValueError(
            f"{what} must look like sm_80, sm_90 or sm_90a (arch-specific) or sm_100f (family), got {arch!r}"
        )
    return str(t)


def device_arch(major: int, minor: int) -> str:
    """``sm_XY`` of a device of compute capability ``major``.``minor``."""
    return f"sm_{major}{minor}"


def runs_on(arch: str, major: int, minor: int) -> bool:
    """Whether code built for ``arch`` runs on a device of compute capability ``major.minor``."""
    t = parse(arch)
    if t is None:
        return False
    if t.kind == "compute":
        return (major, minor) >= (t.major, t.minor)
    if t.suffix == "a":
        return (major, minor) == (t.major, t.minor)
    return major == t.major and minor >= t.minor


def refusal(arch: str, major: int, minor: int, name: str = "the kernel") -> str | None:
    """Why ``name`` built for ``arch`` cannot run on a device of compute capability
    ``major.minor`` (a sentence naming both), or None when it can."""
    if runs_on(arch, major, minor):
        return None
    t = parse(arch)
    device = f"compute capability {major}.{minor} ({device_arch(major, minor)})"
    if t is None:
        return f"{name} is built for {arch!r}, not a target cupy_ops knows; this device is {device}"
    if t.suffix == "a":
        runs = f"only on compute capability {t.major}.{t.minor}"
    elif t.kind == "compute":
        runs = f"on compute capability {t.major}.{t.minor} and newer"
    else:
        runs = f"on compute capability {t.major}.{t.minor} to {t.major}.9"
    return f"{name} is built for {arch}, which runs {runs}; this device is {device}"


def for_device(arch: str | None, device: str) -> str | None:
    """The target to build a source fixed to ``arch`` (None: not fixed) with for a device of
    target ``device`` (``"sm_86"``, or ``"compute_120"`` for a device NVRTC is older than):
    ``device`` itself when not fixed, ``arch`` when the device runs it, else None."""
    if arch is None:
        return device
    d = parse(device)
    if d is None:
        return None
    if d.kind == "compute":  # a device newer than NVRTC: only PTX of its own would do
        return arch if runs_on(arch, d.major, d.minor) and parse(arch).suffix == "" else None
    return arch if runs_on(arch, d.major, d.minor) else None
