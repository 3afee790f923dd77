"""What a result file records about where it was measured: commit, date, GPU, driver and versions."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import torch


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()


def _commit() -> str:
    """HEAD of the checkout (short, and whether it has changes), or ``$CUPY_OPS_COMMIT`` when
    set: a copy of the tree whose git metadata is not its own (a synced GPU machine) says so there."""
    if os.environ.get("CUPY_OPS_COMMIT"):
        return os.environ["CUPY_OPS_COMMIT"]
    root = Path(__file__).resolve().parents[2]
    unknown = "unknown (not a git checkout)"
    try:
        # an installed package may sit inside another repository (a virtualenv in a project)
        top = _git(root, "rev-parse", "--show-toplevel")
        if not top or Path(top).resolve() != root:
            return unknown
        sha = _git(root, "rev-parse", "--short", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return unknown
    return (sha + (" + uncommitted changes" if dirty else "")) if sha else unknown


def _driver() -> str:
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
        return next(w for w in first.split() if w.count(".") >= 1 and w[0].isdigit())
    except (OSError, StopIteration, IndexError):
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.split()
        return out[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cupy_version() -> str:
    try:
        import cupy
    except ImportError:
        return "not installed"
    return cupy.__version__


def _nvrtc_version() -> str:
    from cupy_ops.compiler import nvrtc

    try:
        return ".".join(map(str, nvrtc.version()))
    except Exception as exc:  # noqa: BLE001 -- CuPy or libnvrtc missing: say so, don't fail
        return f"not available ({type(exc).__name__})"


def environment(device: int = 0) -> dict:
    """Commit, date (UTC), GPU (name, SMs), driver, CUDA, torch, CuPy, NVRTC, Python and cupy_ops versions.

    Works without a GPU or CuPy: the missing parts read "none" / "not installed".
    """
    import cupy_ops

    env = {
        "commit": _commit(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "gpu": "none",
        "sm_count": 0,
        "capability": "none",
        "driver": _driver(),
        "cuda": torch.version.cuda or "none (CPU-only torch)",
        "torch": torch.__version__,
        "cupy": _cupy_version(),
        "nvrtc": _nvrtc_version(),
        "cupy_ops": cupy_ops.__version__,
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(device)
        env.update(
            gpu=torch.cuda.get_device_name(device),
            sm_count=props.multi_processor_count,
            capability=".".join(map(str, torch.cuda.get_device_capability(device))),
        )
    return env


def describe(env: dict) -> str:
    """One line for the top of a result file (of a read one too: a field it lacks reads "?")."""
    e = {
        k: "?"
        for k in ("gpu", "sm_count", "capability", "driver", "torch", "cuda", "cupy", "nvrtc", "cupy_ops", "commit")
    }
    e.update({k: v for k, v in env.items() if v is not None})
    return (
        f"{e['gpu']} ({e['sm_count']} SMs, sm_{str(e['capability']).replace('.', '')}), driver {e['driver']}; "
        f"torch {e['torch']} (CUDA {e['cuda']}), CuPy {e['cupy']}, NVRTC {e['nvrtc']}; "
        f"cupy_ops {e['cupy_ops']} at commit {e['commit']}" + (f", {env['date']}" if env.get("date") else "")
    )
