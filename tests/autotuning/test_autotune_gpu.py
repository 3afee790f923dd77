"""cupy_ops.autotune on the GPU: of a planted set of configurations, where all but one repeat
their work REPEAT times, the one that does not is chosen, computes the right result, and a new
process takes it from the disk cache without timing anything (its timer refuses to run)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cupy_ops
from cupy_ops import device

ROOT = Path(__file__).resolve().parents[2]

# y = x * s, computed REPEAT times in a chain the compiler must keep (acc * 0 is not 0 for
# every float, so no iteration folds away): REPEAT=1 is the planted fast configuration.
PLANTED = r"""
extern "C" __global__ void planted(const float* x, float* y, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float t = x[i] * s, acc = 0.f;
#pragma unroll 1
  for (int r = 0; r < REPEAT; ++r) acc = fmaf(acc, 0.f, t);
  y[i] = acc;
}
"""
CONFIGS = (
    [cupy_ops.Config(block=b, defines={"REPEAT": 1000}) for b in (128, 256, 512)]
    + [cupy_ops.Config(block=256, defines={"REPEAT": 1})]
    + [cupy_ops.Config(block=1024, defines={"REPEAT": 1000})]
)
FAST = 3


def grid(cfg, x, y, s, n):
    return cupy_ops.cdiv(n, cfg.threads)


def planted():
    return cupy_ops.autotune(PLANTED, "planted", CONFIGS, grid=grid, runs=10)


def test_the_planted_kernel_compiles_for_sm_90():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
    t = planted()
    for i in range(len(CONFIGS)):
        r = t.kernel(i).compile_offline("sm_90")[0]
        assert r.ok and r.spill_stores == 0, r.log


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    return tmp_path


NEW_PROCESS = """
import sys, torch, cupy_ops
from cupy_ops.autotuning import tuner
sys.path.insert(0, {tests!r})
from test_autotune_gpu import planted
def refuse(*a, **k):
    raise SystemExit("a configuration was timed in the new process")
tuner._time = refuse
t = planted()
x = torch.randn(1 << 22, device="cuda")
y = torch.empty_like(x)
t(x, y, 3.0, x.numel())
torch.cuda.synchronize()
c = t.best(x, y, 3.0, x.numel())
print(t.configs.index(c), t.tune(x, y, 3.0, x.numel()).origin, t.timings,
      bool(torch.equal(y, x * 3.0)))
"""


@pytest.mark.gpu
def test_autotune_picks_the_planted_fastest_and_a_new_process_reuses_it(cuda, cache_dir, capsys):
    t = planted()
    x = torch.randn(1 << 22, device=cuda)
    y = torch.empty_like(x)
    t(x, y, 3.0, x.numel())
    torch.cuda.synchronize()
    assert torch.equal(y, x * 3.0)
    choice = t.tune(x, y, 3.0, x.numel())
    assert choice.origin == "timed" and choice.index == FAST, t.report()
    assert t.timings == len(CONFIGS)
    rows = choice.trials
    slowest_fast_ratio = min(r["ms"] for i, r in enumerate(rows) if i != FAST) / rows[FAST]["ms"]
    assert slowest_fast_ratio > 3, t.report()
    assert "cupy_ops autotune planted" in capsys.readouterr().err  # the progress line
    proc = subprocess.run(
        [sys.executable, "-c", NEW_PROCESS.format(tests=str(ROOT / "tests" / "autotuning"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CUPY_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == [str(FAST), "disk", "0", "True"], proc.stdout
    assert "cupy_ops autotune" not in proc.stderr


@pytest.mark.gpu
def test_the_estimate_prunes_what_the_driver_would_not_run(cuda, cache_dir):
    """A configuration with more dynamic shared memory than a block may have is pruned, never
    launched; the one left is timed and chosen."""
    limit = device.device_limits(0).smem_per_block
    cs = [
        cupy_ops.Config(block=256, defines={"REPEAT": 1}, shared_mem=limit + 1024),
        cupy_ops.Config(block=256, defines={"REPEAT": 1}),
    ]
    t = cupy_ops.autotune(PLANTED, "planted", cs, grid=grid, runs=3, progress=False)
    x = torch.randn(4096, device=cuda)
    choice = t.tune(x, torch.empty_like(x), 1.0, x.numel())
    assert choice.index == 1 and "shared memory" in choice.trials[0]["pruned"] and t.timings == 1


ACCUMULATE = r"""
extern "C" __global__ void accumulate(const float* x, float* y, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * ITEMS;
  for (int j = 0; j < ITEMS; ++j)
    if (i + j < n) y[i + j] += x[i + j];
}
"""


@pytest.mark.gpu
def test_the_call_that_tunes_an_accumulating_kernel_adds_once(cuda, cache_dir):
    """y += x, tuned on its first call's own arrays: every timed run adds to y, so tuning puts
    y back before the call's launch, which then adds x once (the sum torch computes)."""
    configs = [cupy_ops.Config(block=b, defines={"ITEMS": k}) for b in (128, 256) for k in (1, 4)]
    t = cupy_ops.autotune(
        ACCUMULATE, "accumulate", configs, grid=lambda cfg, x, y, n: cupy_ops.cdiv(n, cfg.threads * cfg["ITEMS"]),
        runs=5, progress=False,
    )  # fmt: skip
    x = torch.randn(1 << 20, device=cuda)
    y = torch.randn(1 << 20, device=cuda)
    expected = y + x
    t(x, y, x.numel())
    assert t.timings == len(configs)  # it was tuned by this call
    assert torch.equal(y, expected)
    t(x, y, x.numel())  # tuned: one launch
    assert torch.equal(y, expected + x)
