"""cupy_ops.autotune on the CPU: configurations, the occupancy estimate against the occupancy
calculator's figures, pruning from ptxas' report (NVRTC compiles here), the disk cache's key
and round trip (in this process and a new one, timed by a fake timer that records what it
was asked to time), and ``python -m cupy_ops warm --tune``. The GPU half is in
tests/test_autotune_gpu.py."""

import ctypes
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import cupy_ops
from cupy_ops import autotuning as at
from cupy_ops import device, launch
from cupy_ops.autotuning import tuner
from cupy_ops.compiler import OfflineResult, cache

pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")

ROOT = Path(__file__).resolve().parents[2]

# ITEMS elements per thread; HEAVY live values per thread (registers, or spills under a
# -maxrregcount); the result is x * s whatever the configuration.
SOURCE = r"""
template <class T>
__global__ void scale(const T* x, T* y, float s, long long n) {
  long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * ITEMS;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j)
    if (i + j < n) y[i + j] = from_float<T>(to_float(x[i + j]) * s);
#ifdef HEAVY
  float v[HEAVY];
#pragma unroll
  for (int j = 0; j < HEAVY; ++j) v[j] = to_float(x[(i + 977 * j) % n]);
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < HEAVY; ++j) acc = fmaf(acc, v[j], v[HEAVY - 1 - j]);
  if (acc == 1234.5f) y[0] = from_float<T>(acc);   // keeps every load live, never true for the tests' data
#endif
}
"""
ENV = at.Environment("Fake GPU", "13000", "13.0", "sm_90", device.LIMITS["sm_90"])


def grid(cfg, x, y, s, n):
    return cupy_ops.cdiv(n, cfg.threads * cfg["ITEMS"])


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    return tmp_path


@pytest.fixture
def fake_gpu(monkeypatch):
    """Tuning on a fake sm_90 GPU: every configuration asked to be timed is recorded, and
    its time is the one planted in ``times`` (by configuration label; 5 ms if not planted)."""
    asked, times = [], {}

    def time_fns(fns, device, runs):
        asked.append(sorted(fns))
        return {i: times.get(i, 5.0) for i in fns}

    monkeypatch.setattr(tuner, "_environment", lambda device: ENV)
    monkeypatch.setattr(tuner, "_time", time_fns)
    monkeypatch.setattr(tuner, "_first_launch", lambda fn: None)
    return asked, times


def args(n=1000):
    x = torch.randn(n)
    return x, torch.empty_like(x), 2.0, n


# --- configurations ------------------------------------------------------------------------


def test_configs_is_every_combination_and_names_other_than_fields_are_defines():
    cs = cupy_ops.configs(block=[128, 256], ITEMS=[1, 4], shared_mem=1024)
    assert [(c.block, c.defines, c.shared_mem) for c in cs] == [
        (128, {"ITEMS": 1}, 1024),
        (128, {"ITEMS": 4}, 1024),
        (256, {"ITEMS": 1}, 1024),
        (256, {"ITEMS": 4}, 1024),
    ]
    c = cupy_ops.Config(block=(16, 16), defines={"TILE": 8}, template=(torch.float32, 4), options="-lineinfo")
    assert c.threads == 256 and c["TILE"] == 8 and c.options == ("-lineinfo",)
    assert c.label() == "block=(16, 16) TILE=8 <float, 4> -lineinfo"
    with pytest.raises(KeyError, match="has no define 'ITEMS'"):
        c["ITEMS"]
    with pytest.raises(ValueError, match="block must have at most 1024 threads"):
        cupy_ops.Config(block=(64, 32))
    with pytest.raises(TypeError, match="defines must be a dict"):
        cupy_ops.Config(defines=[("A", 1)])


def test_autotune_arguments_are_checked():
    cs = cupy_ops.configs(block=[128], ITEMS=[1])
    with pytest.raises(TypeError, match=r"configs must be a non-empty list of cupy_ops\.Config"):
        cupy_ops.autotune(SOURCE, "scale", [], grid=grid)
    with pytest.raises(TypeError, match="grid must be a callable"):
        cupy_ops.autotune(SOURCE, "scale", cs, grid="x")
    with pytest.raises(ValueError, match=r"min_occupancy must be in \[0, 1\]"):
        cupy_ops.autotune(SOURCE, "scale", cs, grid=grid, min_occupancy=2)
    with pytest.raises(ValueError, match="no `__global__ void nope"):
        cupy_ops.autotune(SOURCE, "nope", cs, grid=grid)
    t = cupy_ops.autotune(SOURCE, "scale", cs, grid=grid, key=["n", "m"])
    with pytest.raises(ValueError, match=r"key names \['m'\], which are not parameters of scale"):
        t.key(*args())


def test_the_shape_key_counts_shapes_dtypes_and_ints_not_floats():
    t = cupy_ops.autotune(SOURCE, "scale", cupy_ops.configs(block=128, ITEMS=1), grid=grid)
    x, y, _, n = args(1000)
    assert t.key(x, y, 2.0, n) == t.key(x, y, 3.0, n) == "(((1000,), 'float32'), ((1000,), 'float32'), 1000)"
    assert t.key(x.double(), y.double(), 2.0, n) != t.key(x, y, 2.0, n)
    by_n = cupy_ops.autotune(SOURCE, "scale", cupy_ops.configs(block=128, ITEMS=1), grid=grid, key=["n"])
    assert by_n.key(x, y, 2.0, 1000) == "(1000,)"
    by_fn = cupy_ops.autotune(
        SOURCE, "scale", cupy_ops.configs(block=128, ITEMS=1), grid=grid, key=lambda x, y, s, n: n // 1024
    )
    assert by_fn.key(x, y, 2.0, 5000) == "4"


# --- the occupancy estimate and pruning ----------------------------------------------------


@pytest.mark.parametrize(
    "registers, threads, smem, blocks",
    [
        (32, 256, 0, 8),  # 2048 threads per SM
        (64, 256, 0, 4),  # registers: 64 x 32 per warp, 65536 per SM
        (255, 128, 0, 2),  # 255 registers round up to 8192 per warp
        (32, 128, 49152, 4),  # shared memory: (48 KB + 1 KB reserved) into 228 KB
        (16, 32, 0, 32),  # the blocks-per-SM cap
        (128, 1024, 0, 0),  # 128 x 1024 registers: more than an SM has
        (32, 128, 232449, 0),  # more shared memory than a block may have
        (152, 32, 0, 12),  # registers per sub-partition: 3 warps of 4864 in each of 4
        (200, 320, 0, 0),  # 10 warps counted as 12 x 6400 registers: more than a block may have
    ],
)
def test_the_occupancy_estimate_matches_the_occupancy_calculator(registers, threads, smem, blocks):
    assert device.estimated_blocks_per_sm(registers, threads, smem, device.LIMITS["sm_90"]) == blocks


def report(**kw):
    return OfflineResult(
        "s",
        "e",
        "sm_90",
        kw.pop("ok", True),
        **{"registers": 32, "spill_stores": 0, "spill_loads": 0, "shared_bytes": 0, **kw},
    )


@pytest.mark.parametrize(
    "result, config, reason",
    [
        (report(spill_stores=8, spill_loads=4), {}, r"spills registers \(8 bytes stored, 4 loaded\)"),
        (
            report(shared_bytes=40000),
            {"shared_mem": 200000},
            "needs 240000 bytes of shared memory, a block may have 232448",
        ),
        (report(registers=128), {"block": 1024}, r"no block fits on an SM \(128 registers x 1024 threads"),
        (report(shared_bytes=100000), {"block": 32}, r"occupancy 3% below 6%"),  # 2 blocks of 1 warp
        (
            report(ok=False, log='x.cu(3): error: identifier "q" is undefined\n1 error'),
            {},
            r"compile failed: x.cu\(3\): error: identifier",
        ),
        (report(), {"block": 256}, ""),
    ],
)
def test_prune_reasons_from_the_compile_report(result, config, reason):
    why, _ = at.prune_reason(result, cupy_ops.Config(**config), device.LIMITS["sm_90"], 1 / 16)
    if reason:
        assert why and re.search(reason, why), why
    else:
        assert why == ""


def test_without_a_ptxas_report_nothing_is_pruned():
    why, occ = at.prune_reason(report(registers=None), cupy_ops.Config(block=1024), device.LIMITS["sm_90"], 0.5)
    assert (why, occ) == ("", None)


def test_spilling_and_oversized_configurations_are_pruned_before_timing(cache_dir, fake_gpu):
    """NVRTC's real report for sm_90: -maxrregcount=16 makes HEAVY spill, 300 KB of dynamic
    shared memory exceeds a block's, HEAVY without a cap has too many registers for 1024
    threads: only the others are timed, and the fastest of them wins."""
    asked, times = fake_gpu
    cs = [
        cupy_ops.Config(block=256, defines={"ITEMS": 1}),  # 0
        cupy_ops.Config(block=256, defines={"ITEMS": 1, "HEAVY": 96}, options=["-maxrregcount=16"]),  # 1 spills
        cupy_ops.Config(block=256, defines={"ITEMS": 1}, shared_mem=300_000),  # 2 smem
        cupy_ops.Config(block=1024, defines={"ITEMS": 1, "HEAVY": 96}),  # 3 registers
        cupy_ops.Config(block=128, defines={"ITEMS": 4}),
    ]  # 4
    times.update({0: 2.0, 4: 1.5})
    t = cupy_ops.autotune(SOURCE, "scale", cs, grid=grid, progress=False)
    choice = t.tune(*args())
    assert asked == [[0, 4]]
    assert choice.index == 4 and choice.config is cs[4] and choice.origin == "timed" and choice.ms == 1.5
    rows = choice.trials
    assert "spills registers" in rows[1]["pruned"] and rows[1]["spills"][0] > 0
    assert "needs 300000 bytes of shared memory" in rows[2]["pruned"]
    assert "no block fits on an SM" in rows[3]["pruned"] and rows[3]["registers"] > 64
    assert rows[0]["registers"] and rows[0]["occupancy"] == 1.0 and rows[0]["ms"] == 2.0
    table = t.report(*args())
    assert "block=128 ITEMS=4" in table and "<- best" in table.splitlines()[-1] and "timed now" in table
    assert table.count("pruned: ") == 3


def test_tuning_puts_back_the_arrays_the_kernel_may_write(cache_dir, fake_gpu, monkeypatch):
    """Tuning launches the kernel many times on the call's own arrays, so an accumulating
    kernel (y += x) would add once a run: the arrays at pointers to non-const (y) are copied
    first and put back after, the const ones (x) not copied at all."""
    from conftest import on_device  # (here: a new process imports this module without tests/ on its path)

    n = 1000
    x, y = on_device(0, n), on_device(0, n)  # CPU memory that says it is on cuda:0
    y.fill_(3.0)
    before = y.clone()
    y.requires_grad_()  # (a leaf that requires grad: put back by bytes, not by a tensor op)

    def time_fns(fns, device, runs):  # the timed runs write y, as the kernel would
        with torch.no_grad():
            y.add_(1.0)
        return {i: 5.0 for i in fns}

    monkeypatch.setattr(tuner, "_time", time_fns)
    monkeypatch.setattr(tuner, "_scratch", lambda device, nbytes: torch.empty(nbytes, dtype=torch.uint8))
    monkeypatch.setattr(launch, "memcpy", lambda device, dst, src, nbytes: ctypes.memmove(dst, src, nbytes))
    t = cupy_ops.autotune(
        SOURCE, "scale", [cupy_ops.Config(block=128, defines={"ITEMS": 1})], grid=grid, progress=False
    )
    version = y._version
    assert t.tune(x, y, 2.0, n).origin == "timed"
    assert torch.equal(y.detach(), before) and y._version == version + 1  # (the stand-in's one add)
    assert tuner.writable(t.kernel(0), (x, y, 2.0, n)) == [(0, y.data_ptr(), 4 * n)]
    assert tuner.pointee_is_const("const float* __restrict__") and tuner.pointee_is_const("float const*")
    assert not tuner.pointee_is_const("float* const") and not tuner.pointee_is_const("T* __restrict__")


def test_every_configuration_pruned_is_an_error_naming_each_reason(cache_dir, fake_gpu):
    cs = [cupy_ops.Config(block=256, defines={"ITEMS": 1}, shared_mem=300_000)]
    t = cupy_ops.autotune(SOURCE, "scale", cs, grid=grid, progress=False)
    with pytest.raises(RuntimeError, match=r"no configuration left to time \(block=256 ITEMS=1 smem=300000: needs"):
        t.tune(*args())


def test_the_progress_line_and_the_table_on_request(cache_dir, fake_gpu, capsys):
    t = cupy_ops.autotune(SOURCE, "scale", cupy_ops.configs(block=[128, 256], ITEMS=1), grid=grid, verbose=True)
    t.tune(*args())
    err = capsys.readouterr().err
    assert (
        "cupy_ops autotune scale (((1000,), 'float32'), ((1000,), 'float32'), 1000): 2/2 configurations "
        "checked, 0 pruned, 2 timed" in err
    )
    assert "configuration" in err and "<- best" in err


# --- the disk cache ------------------------------------------------------------------------


def test_the_cache_key_holds_source_configurations_shape_gpu_driver_and_nvrtc():
    cs = cupy_ops.configs(block=[128, 256], ITEMS=1)
    t = cupy_ops.autotune(SOURCE, "scale", cs, grid=grid)
    k = t._cache_key("K", ENV)
    assert k == cupy_ops.autotune(SOURCE, "scale", cupy_ops.configs(block=[128, 256], ITEMS=1), grid=grid)._cache_key(
        "K", ENV
    )
    others = [t._cache_key("K2", ENV)]
    for field, value in (("gpu", "Other GPU"), ("driver", "12080"), ("nvrtc", "12.8"), ("arch", "sm_80")):
        others.append(t._cache_key("K", at.Environment(**{**ENV.__dict__, field: value})))
    others.append(cupy_ops.autotune(SOURCE + "\n", "scale", cs, grid=grid)._cache_key("K", ENV))
    others.append(cupy_ops.autotune(SOURCE, "scale", cs[:1], grid=grid)._cache_key("K", ENV))
    others.append(cupy_ops.autotune(SOURCE, "scale", cs, grid=grid, defines={"X": 1})._cache_key("K", ENV))
    others.append(cupy_ops.autotune(SOURCE, "scale", cs, grid=grid, options=["-lineinfo"])._cache_key("K", ENV))
    assert len({k, *others}) == len(others) + 1


def test_the_winner_comes_back_from_disk_without_timing(cache_dir, fake_gpu):
    asked, times = fake_gpu
    times.update({1: 0.5})
    cs = cupy_ops.configs(block=[128, 256, 512], ITEMS=1)
    first = cupy_ops.autotune(SOURCE, "scale", cs, grid=grid, progress=False)
    assert first.tune(*args()).index == 1 and first.timings == 3
    entries = list((cache_dir / "cupy_ops").glob("*.bin"))
    assert len([p for p in entries if b'"winner": 1' in p.read_bytes()]) == 1
    asked.clear()
    again = cupy_ops.autotune(
        SOURCE, "scale", cupy_ops.configs(block=[128, 256, 512], ITEMS=1), grid=grid, progress=False
    )
    choice = again.tune(*args())
    assert (choice.index, choice.origin, again.timings, asked) == (1, "disk", 0, [])
    assert "from the disk cache" in again.report(*args()) and "0.5000 ms  <- best" in again.report(*args())
    other_shape = again.tune(*args(2000))
    assert other_shape.origin == "timed" and asked == [[0, 1, 2]]


def test_a_corrupt_entry_is_tuned_again(cache_dir, fake_gpu):
    asked, _ = fake_gpu
    cs = cupy_ops.configs(block=[128, 256], ITEMS=1)
    cupy_ops.autotune(SOURCE, "scale", cs, grid=grid, progress=False).tune(*args())
    for p in (cache_dir / "cupy_ops").glob("*.bin"):
        if b'"winner"' in p.read_bytes():
            p.write_bytes(p.read_bytes()[:-3])
    asked.clear()
    with pytest.warns(RuntimeWarning, match="is corrupt"):
        choice = cupy_ops.autotune(SOURCE, "scale", cs, grid=grid, progress=False).tune(*args())
    assert choice.origin == "timed" and asked == [[0, 1]]


NEW_PROCESS = """
import sys, torch, cupy_ops
from cupy_ops.autotuning import tuner
sys.path.insert(0, {tests!r})
from test_autotune import ENV, SOURCE, grid
tuner._environment = lambda device: ENV
def refuse(*a):
    raise SystemExit("timed in the new process")
tuner._time = tuner._first_launch = refuse
t = cupy_ops.autotune(SOURCE, "scale", cupy_ops.configs(block=[128, 256, 512], ITEMS=1), grid=grid)
x = torch.randn(1000)
c = t.tune(x, torch.empty_like(x), 2.0, 1000)
print(c.index, c.origin, t.timings)
"""


def test_a_new_process_reuses_the_winner_without_timing(cache_dir, fake_gpu):
    _, times = fake_gpu
    times.update({2: 0.25})
    cupy_ops.autotune(
        SOURCE, "scale", cupy_ops.configs(block=[128, 256, 512], ITEMS=1), grid=grid, progress=False
    ).tune(*args())
    proc = subprocess.run(
        [sys.executable, "-c", NEW_PROCESS.format(tests=str(ROOT / "tests" / "autotuning"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "CUPY_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "disk", "0"]
    assert "autotune" not in proc.stderr  # no progress line: nothing was tuned


# --- warm --tune ---------------------------------------------------------------------------

DECLARING = """
import torch, cupy_ops
SOURCE = {source!r}
scale = cupy_ops.autotune(SOURCE, "scale", cupy_ops.configs(block=[128, 256], ITEMS=[1, 2]),
                          grid=lambda c, x, y, s, n: cupy_ops.cdiv(n, c.threads * c["ITEMS"]),
                          examples=lambda: [(torch.ones(n), torch.empty(n), 1.0, n) for n in (1000, 4096)],
                          progress=False)
if __name__ == "__main__":
    raise SystemExit("warm --tune must not run the file's main")
"""


def test_warm_tune_tunes_the_declared_kernels_then_finds_them_cached(
    cache_dir, fake_gpu, tmp_path, capsys, monkeypatch
):
    from cupy_ops.__main__ import main

    asked, times = fake_gpu
    times.update({3: 0.75})
    monkeypatch.setattr(at, "tuning_problem", lambda: None)
    path = tmp_path / "my_kernels.py"
    path.write_text(DECLARING.format(source=SOURCE))
    assert main(["warm", "--tune", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "scale (((1000,), 'float32'), ((1000,), 'float32'), 1000): block=256 ITEMS=2 (0.7500 ms, timed now)",
        "scale (((4096,), 'float32'), ((4096,), 'float32'), 4096): block=256 ITEMS=2 (0.7500 ms, timed now)",
    ]
    assert asked == [[0, 1, 2, 3]] * 2
    asked.clear()
    assert main(["warm", "--tune", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert all(line.endswith("(0.7500 ms, cached already)") for line in out) and len(out) == 2 and asked == []


def test_warm_tune_without_a_gpu_or_declarations_says_so(tmp_path, capsys, monkeypatch):
    from cupy_ops.__main__ import main

    monkeypatch.setattr(at, "tuning_problem", lambda: "no GPU here")
    assert main(["warm", "--tune", str(tmp_path / "x.py")]) == 2
    assert "error: no GPU here" in capsys.readouterr().err
    monkeypatch.setattr(at, "tuning_problem", lambda: None)
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(SystemExit, match=r"declares no cupy_ops\.autotune"):
        main(["warm", "--tune", str(empty)])
    with pytest.raises(SystemExit, match="is not a file"):
        main(["warm", "--tune", str(tmp_path / "missing.py")])


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU message, on a machine without one")
def test_warm_tune_in_a_process_without_a_gpu():
    proc = subprocess.run(
        [sys.executable, "-m", "cupy_ops", "warm", "--tune", "whatever.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "tuning times kernels on a CUDA GPU" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_cache_entries_are_json_a_reader_can_check(cache_dir, fake_gpu):
    t = cupy_ops.autotune(SOURCE, "scale", cupy_ops.configs(block=[128, 256], ITEMS=1), grid=grid, progress=False)
    choice = t.tune(*args())
    meta, image = cache.read(t._cache_key(choice.key, ENV))
    stored = json.loads(meta)
    assert image == b"" and stored["winner"] == choice.index and len(stored["trials"]) == 2
    assert textwrap.dedent(t.report()).startswith("shape key")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_check_prunes_offline_with_no_gpu_and_nothing_timed(arch, monkeypatch):
    """``Autotuned.check(arch)``: what tuning does before timing, with no GPU (its timer and
    environment are never asked)."""
    monkeypatch.setattr(tuner, "_time", lambda *a: pytest.fail("check timed something"))
    monkeypatch.setattr(tuner, "_environment", lambda *a: pytest.fail("check asked for a GPU"))
    cs = [
        cupy_ops.Config(block=256, defines={"ITEMS": 4}),
        cupy_ops.Config(block=256, defines={"ITEMS": 1, "HEAVY": 96}, options=["-maxrregcount=16"]),
        cupy_ops.Config(block=256, defines={"ITEMS": 1}, shared_mem=device.LIMITS[arch].smem_per_block + 1),
    ]
    t = cupy_ops.autotune(SOURCE, "scale", cs, grid=grid)
    trials = t.check(arch, torch.bfloat16)
    assert [bool(x.pruned) for x in trials] == [False, True, True]
    assert trials[0].registers and trials[0].occupancy == 1.0
    text = at.table(trials)
    assert text.splitlines()[1].endswith("kept") and "spills registers" in text and "needs " in text


TEMPLATED = r"""
template <class T, int ITEMS>
__global__ void tiled(const T* x, T* y, long long n) {
  long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * ITEMS;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) if (i + j < n) y[i + j] = x[i + j] * T(SCALE);
}
"""


def test_template_arguments_and_defines_are_searched_together(cache_dir, fake_gpu):
    """Configurations over a template's arguments (each its own instantiation) and a define:
    each compiled as its own name expression with its own -D, the planted fastest chosen."""
    asked, times = fake_gpu
    cs = cupy_ops.configs(block=128, template=[(torch.float32, 1), (torch.float32, 4)], SCALE=[2, 3])
    times.update({3: 0.5})
    t = cupy_ops.autotune(
        TEMPLATED,
        "tiled",
        cs,
        progress=False,
        grid=lambda cfg, x, y, n: cupy_ops.cdiv(n, cfg.threads * cfg.template[1]),
    )
    assert [t.kernel(i).expressions for i in range(4)] == [["tiled<float, 1>"]] * 2 + [["tiled<float, 4>"]] * 2
    assert t.kernel(1)._source.defines == (("SCALE", 3),)
    x = torch.randn(1000)
    choice = t.tune(x, torch.empty_like(x), 1000)
    assert asked == [[0, 1, 2, 3]] and choice.config.label() == "block=128 SCALE=3 <float, 4>"
    assert all(r["registers"] for r in choice.trials)
