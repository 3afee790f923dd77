"""The run-time compile path on a GPU: lazy, one variant per compile, handles cached per
device, the disk cache honoured across processes, errors carry NVRTC's log, and the first
call of every built-in op in a fresh process with an empty cache."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cupy_ops
from cupy_ops import KernelCompileError, compiler, device, launch

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gpu


def test_compile_error_carries_log_and_file(cuda):
    k = cupy_ops.Kernel("template <class T> __global__ void broken(T* p) { p[0] = no_such_name; }\n", "broken")
    with pytest.raises(KernelCompileError) as info:
        k(torch.zeros(1, device=cuda), grid=1, block=1)
    assert info.value.source == "<kernel broken>"
    assert "no_such_name" in info.value.log and "<kernel broken>" in str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_handles_are_cached_per_variant_and_device(cuda):
    x = torch.randn(100, device=cuda)
    cupy_ops.relu(x)
    from cupy_ops.ops.relu import KERNEL

    v = KERNEL.kernel.variant(torch.float32)
    h = launch.handles[(v, 0)]
    assert KERNEL.kernel.handle(torch.float32, 0) is h
    assert launch.handle(v, 0, ()) is h


def test_only_the_launched_variant_is_compiled(cuda, tmp_path):
    # a fresh process, an empty cache: one bf16 relu compiles exactly one variant
    code = (
        "import torch, cupy_ops\nfrom cupy_ops.compiler import build\n"
        "x = torch.randn(100, device='cuda', dtype=torch.bfloat16)\n"
        "assert torch.equal(cupy_ops.relu(x), torch.relu(x))\n"
        "print(sorted(v.expr for v, arch in build._binaries))"
    )
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['relu<bf16>']"
    assert len(list((tmp_path / "cupy_ops").glob("*.bin"))) == 1


def test_cupy_cache_dir_is_honoured(cuda, tmp_path):
    code = (
        "import torch, cupy_ops; x = torch.randn(100, device='cuda'); "
        "assert torch.equal(cupy_ops.relu(x), torch.relu(x)); print('ok')"
    )
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "cupy_ops").glob("*.bin")), "nothing was written to CUPY_CACHE_DIR/cupy_ops"
    # a second process reuses the cache (same results; no new files)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_first_call_of_every_builtin_op_in_a_fresh_process(cuda, tmp_path):
    """Each op's first call, in its own fresh process with an empty cache, then warm (a second
    process, same cache): the figures are a benchmark (python -m cupy_ops.bench.first_call),
    not a timed test; here every call must succeed and be right."""
    out = tmp_path / "first_call.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cupy_ops.bench.first_call", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert {r["op"] for r in rows} >= {"relu", "relu_div", "matmul", "linear_relu_div"}
    for r in rows:
        assert r["correct"] and r["cold_s"] > 0 and r["warm_s"] > 0, r
    print(proc.stdout)


def test_sm90a_source_refuses_another_architecture(cuda):
    src = compiler.user('extern "C" __global__ void k() {}', "other_arch.cu", arch="sm_100a")
    arch = device.arch(0)
    with pytest.raises(
        RuntimeError,
        match=rf"on cuda:0: other_arch.cu is built for sm_100a, which runs only on "
        rf"compute capability 10.0; this device is .*\({arch}\)",
    ):
        launch.handle(src.variant("k"), 0, ())
