"""What a result file records about where it was measured: commit, GPU, driver and versions."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import torch


def _commit() -> str:
    """HEAD of the checkout (and whether it has changes), or ``$CUPY_OPS_COMMIT`` when set: a
    copy of the tree whose git metadata is not its own (a synced GPU machine) says so there."""
    if os.environ.get("CUPY_OPS_COMMIT"):
        return os.environ["CUPY_OPS_COMMIT"]
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return (sha + (" + uncommitted changes" if dirty else "")) if sha else "unknown (not a git checkout)"


def _driver() -> str:
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
        return next(w for w in first.split() if w.count(".") >= 1 and w[0].isdigit())
    except (OSError, StopIteration, IndexError):
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.split()
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
    except Exception as exc:   # noqa: BLE001 -- CuPy or libnvrtc missing: say so, don't fail
        return f"not available ({type(exc).__name__})"


def environment(device: int = 0) -> dict:
    """Commit, GPU (name, SMs), driver, CUDA, torch, CuPy, NVRTC, Python and cupy_ops versions.

    Works without a GPU or CuPy: the missing parts read "none" / "not installed".
    """
    import cupy_ops

    env = {"commit": _commit(), "gpu": "none", "sm_count": 0, "capability": "none", "driver": _driver(),
           "cuda": torch.version.cuda or "none (CPU-only torch)", "torch": torch.__version__,
           "cupy": _cupy_version(), "nvrtc": _nvrtc_version(), "cupy_ops": cupy_ops.__version__,
           "python": platform.python_version()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(device)
        env.update(gpu=torch.cuda.get_device_name(device), sm_count=props.multi_processor_count,
                   capability=".".join(map(str, torch.cuda.get_device_capability(device))))
    return env


def describe(env: dict) -> str:
    """One line for the top of a result file."""
    return (f"{env['gpu']} ({env['sm_count']} SMs, sm_{env['capability'].replace('.', '')}), driver {env['driver']}; "
            f"torch {env['torch']} (CUDA {env['cuda']}), CuPy {env['cupy']}, NVRTC {env['nvrtc']}; "
            f"cupy_ops {env['cupy_ops']} at commit {env['commit']}")
