"""Faults: an unusable or corrupted kernel cache, memory over many calls, errors mid-stream."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cupy_ops

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.gpu

WORKER = (
    "import torch, cupy_ops; x = torch.randn(10_001, device='cuda'); "
    "assert torch.equal(cupy_ops.relu_div(x, 3.0), torch.relu(x) / 3.0); print('ok')"
)


def run(env):
    return subprocess.run(
        [sys.executable, "-c", WORKER],
        cwd=ROOT,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_unusable_cache_dir_warns_and_still_computes(cuda, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    proc = run({"CUPY_CACHE_DIR": str(blocker / "cache")})  # cannot be created, even by root
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    assert "kernel cache" in proc.stderr and "not usable" in proc.stderr


def test_corrupted_cache_is_recompiled(cuda, tmp_path):
    cache = tmp_path / "cache"
    assert run({"CUPY_CACHE_DIR": str(cache)}).returncode == 0
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert files
    for i, p in enumerate(files):  # garbage, truncated and empty entries
        p.write_bytes([b"garbage" * 100, b"x", b""][i % 3])
    proc = run({"CUPY_CACHE_DIR": str(cache)})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_no_memory_growth_over_10000_calls(cuda):
    x = torch.randn(4096, device=cuda)
    w = torch.randn(16, 64, device=cuda)
    for _ in range(100):  # warm up: compile, allocate caches
        cupy_ops.relu(x)
        cupy_ops.relu_div(x, 2.0)
        cupy_ops.linear_relu_div(x[:1024].view(16, 64), w, None, 2.0)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(cuda)
    for _ in range(10_000):
        cupy_ops.relu(x)
        cupy_ops.relu_div(x, 2.0)
        cupy_ops.linear_relu_div(x[:1024].view(16, 64), w, None, 2.0)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated(cuda) == before


def test_library_keeps_working_after_every_kind_of_error(cuda):
    x = torch.randn(100, device=cuda)
    bad_calls = [
        lambda: cupy_ops.relu(x.cpu()),
        lambda: cupy_ops.relu(x.int()),
        lambda: cupy_ops.relu_div(x, "2"),
        lambda: cupy_ops.matmul(x, x[:3]),  # sizes that do not match
        lambda: cupy_ops.relu_(x.clone().requires_grad_()),
        lambda: cupy_ops.Kernel("__global__ void k(float* p) { nope; }", "k")(x, grid=1, block=1),
    ]
    for call in bad_calls:
        with pytest.raises((TypeError, ValueError, RuntimeError)):
            call()
        assert torch.equal(cupy_ops.relu(x), torch.relu(x))
