"""The run-time compile path: lazy, cached per process and on disk, errors carry the log."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cupy_ops import KernelCompileError, compiler

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.gpu


def test_compile_error_carries_log_and_file(cuda, tmp_path, monkeypatch):
    (tmp_path / "broken_kernel.cu").write_text(
        "template <class T> __global__ void broken(T* p) { p[0] = no_such_name; }\n")
    monkeypatch.setattr(compiler, "source_dir", lambda: tmp_path)
    compiler.register("broken_kernel.cu", ["broken<float>"])
    try:
        with pytest.raises(KernelCompileError) as info:
            compiler.get_function("broken_kernel.cu", "broken<float>", 0)
        assert info.value.source == "broken_kernel.cu"
        assert "no_such_name" in info.value.log and "broken_kernel.cu" in str(info.value)
        assert isinstance(info.value, RuntimeError)
    finally:
        compiler._registry.pop("broken_kernel.cu", None)


def test_functions_are_cached(cuda):
    f1 = compiler.get_function("relu.cu", "relu<float>", 0)
    f2 = compiler.get_function("relu.cu", "relu<float>", 0)
    assert f1 is f2


def test_cupy_cache_dir_is_honoured(cuda, tmp_path):
    code = ("import torch, cupy_ops; x = torch.randn(100, device='cuda'); "
            "assert torch.equal(cupy_ops.relu(x), torch.relu(x)); print('ok')")
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert any(tmp_path.iterdir()), "nothing was written to CUPY_CACHE_DIR"
    # a second process reuses the cache (same results; no new files)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
