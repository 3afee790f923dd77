"""Kernel compilation and launches from several threads and processes at once."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

import cupy_ops

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gpu

WORKER = """
import torch, cupy_ops
x = torch.randn(100_003, device="cuda")
w = torch.randn(64, 100, device="cuda")
assert torch.equal(cupy_ops.relu(x), torch.relu(x))
assert torch.equal(cupy_ops.relu_div(x, 3.0), torch.relu(x) / 3.0)
y = cupy_ops.linear_relu_div(x[:2000].view(20, 100), w, None, 2.0)
assert torch.allclose(y, torch.relu(x[:2000].view(20, 100) @ w.t()) / 2, atol=1e-4, rtol=1e-4)
print("ok")
"""


def test_eight_processes_share_one_empty_cache(cuda, tmp_path):
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and out.strip() == "ok", err


def test_threads_call_ops_concurrently(cuda):
    def work(seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        x = torch.randn(4097 + seed, device="cuda", generator=g)
        for _ in range(50):
            assert torch.equal(cupy_ops.relu(x), torch.relu(x))
            assert torch.equal(cupy_ops.relu_div(x[1:], 0.3), torch.relu(x[1:]) / 0.3)
        a = torch.randn(33, 17, device="cuda", generator=g)
        torch.testing.assert_close(cupy_ops.matmul(a, a.t()), a @ a.t(), atol=1e-4, rtol=1e-4)
        return True

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(16)))
