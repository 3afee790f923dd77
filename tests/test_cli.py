"""The command line: ``python -m cupy_ops info`` and ``compile`` (built-in and user files), and
every ``python -m cupy_ops...`` entry point: ``--help`` works, and without a GPU (or without
CuPy) each fails in one sentence, never a traceback. CPU tests: they hide the GPU."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINTS = ["cupy_ops", "cupy_ops.bench", "cupy_ops.bench.host", "cupy_ops.bench.first_call"]
NEEDS_GPU = ["cupy_ops.bench", "cupy_ops.bench.host", "cupy_ops.bench.first_call"]


def cli(module, *args, env=None, cwd=ROOT):
    base = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=base, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture
def no_cupy(tmp_path):
    """A PYTHONPATH on which ``import cupy`` fails as it does where CuPy is not installed."""
    for name in ("cupy", "cupy_backends"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ModuleNotFoundError(\"No module named '{name}'\")\n")
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_every_entry_point_answers_help(module):
    proc = cli(module, "--help")
    assert proc.returncode == 0 and "usage:" in proc.stdout and not proc.stderr.strip(), proc.stderr


@pytest.mark.parametrize("module", NEEDS_GPU)
def test_without_a_gpu_every_entry_point_fails_in_one_sentence(module):
    proc = cli(module)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(lines) == 1 and "GPU" in lines[0], proc.stderr


def test_info_without_a_gpu():
    proc = cli("cupy_ops", "info")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for field in ("cupy_ops", "Python", "torch", "CuPy", "NVRTC", "driver", "GPUs", "kernel cache"):
        assert field in out
    assert "GPUs" in out and "none (" in out


def test_info_without_cupy(no_cupy):
    proc = cli("cupy_ops", "info", env=no_cupy)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "not installed" in proc.stdout and "cuda13" in proc.stdout


def test_missing_cupy_is_an_import_error_naming_the_extra(no_cupy):
    code = ("import cupy_ops.compiler as c\n"
            "try:\n    c.import_cupy()\nexcept ImportError as e:\n    print('ImportError:', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, **no_cupy),
                          capture_output=True, text=True, timeout=120)
    assert "ImportError:" in proc.stdout and "cupy_ops[cuda13]" in proc.stdout and "cupy_ops[cuda12]" in proc.stdout


def test_compile_without_cupy_is_one_sentence(no_cupy):
    proc = cli("cupy_ops", "compile", "--arch", "sm_90", env=no_cupy)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "extra" in lines[0], proc.stderr


GOOD = textwrap.dedent("""
    template <class T>
    __global__ void twice(const T* x, T* y, long long n) {
      long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
      if (i < n) y[i] = from_float<T>(2.0f * to_float(x[i]));
    }
    extern "C" __global__ void zero(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 0.0f; }
""")


def test_compile_a_user_file(tmp_path):
    path = tmp_path / "mine.cu"
    path.write_text(GOOD)
    proc = cli("cupy_ops", "compile", "--arch", "sm_90", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for expr in ("twice<float>", "twice<f16>", "twice<bf16>", "twice<double>", "zero"):
        assert expr in proc.stdout
    assert "5 of 5 kernel variants compiled for sm_90" in proc.stdout
    proc = cli("cupy_ops", "compile", "--arch", "sm_80", str(path), "--name", "zero")
    assert proc.returncode == 0 and "1 of 1 kernel variants compiled for sm_80" in proc.stdout
    assert "twice" not in proc.stdout


def test_compile_a_user_file_with_an_error_shows_the_nvrtc_log(tmp_path):
    path = tmp_path / "broken.cu"
    path.write_text('#include "common.cuh"\n\n__global__ void broken(float* y) {\n  y[0] = not_declared;\n}\n')
    proc = cli("cupy_ops", "compile", "--arch", "sm_90", str(path))
    assert proc.returncode == 1
    assert "FAILED" in proc.stdout and "0 of 1 kernel variants" in proc.stdout
    # NVRTC's log, with the line number of the user's own file (line 4)
    assert 'broken.cu(4): error: identifier "not_declared" is undefined' in proc.stderr, proc.stderr


def test_compile_a_missing_file_or_kernel_is_one_sentence(tmp_path):
    proc = cli("cupy_ops", "compile", str(tmp_path / "nope.cu"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "not a file" in proc.stderr
    path = tmp_path / "mine.cu"
    path.write_text(GOOD)
    proc = cli("cupy_ops", "compile", str(path), "--name", "absent")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "absent" in proc.stderr


def test_compile_emits_ptx_and_cubin_named_after_each_kernel_and_arch(tmp_path):
    path = tmp_path / "mine.cu"
    path.write_text(GOOD + "template <int N> __global__ void tiles(float* y) { y[0] = N; }\n")
    proc = cli("cupy_ops", "compile", "--arch", "sm_80", "--arch", "sm_90", str(path), "--name", "twice",
               "--name", "tiles<4>", "--emit", "ptx")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "10 of 10 kernel variants compiled for sm_80, sm_90" in proc.stdout
    for stem in ("twice", "tiles_4"):
        for arch in ("sm_80", "sm_90"):
            out = tmp_path / f"{stem}.{arch}.ptx"          # next to PATH.cu
            assert f"wrote {out} (ptx for compute_{arch[3:]}; " in proc.stdout
            assert f".target {arch}" in out.read_text()
    assert (tmp_path / "twice.sm_90.ptx").read_text().count(".entry _Z5twice") == 4   # float, f16, bf16, double
    assert "tiles<4> = _Z5tilesILi4EEvPf" in proc.stdout
    folder = tmp_path / "out"
    folder.mkdir()
    proc = cli("cupy_ops", "compile", "--arch", "sm_90", str(path), "--name", "zero", "--emit", "cubin",
               "--out", str(folder))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (folder / "zero.sm_90.cubin").read_bytes()[:4] == b"\x7fELF" and "zero = zero" in proc.stdout


def test_compile_emit_errors_are_one_sentence(tmp_path):
    proc = cli("cupy_ops", "compile", "--emit", "ptx")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "--emit needs a PATH.cu" in proc.stderr
    path = tmp_path / "mine.cu"
    path.write_text(GOOD)
    proc = cli("cupy_ops", "compile", str(path), "--emit", "ptx", "--out", str(tmp_path / "absent"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "is not a folder" in proc.stderr
    proc = cli("cupy_ops", "compile", str(path), "--emit", "sass")
    assert proc.returncode == 2 and "invalid choice: 'sass'" in proc.stderr


def test_bench_redraws_a_result_file_without_a_gpu():
    results = ROOT / "benchmarks" / "results" / "h100.jsonl"
    proc = cli("cupy_ops.bench", "--from-json", str(results))
    assert proc.returncode == 0, proc.stderr
    assert "relu_div" in proc.stdout and "wgmma (auto)" in proc.stdout


def test_compile_name_without_a_file_is_one_sentence():
    proc = cli("cupy_ops", "compile", "--name", "scale")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "--name needs a PATH.cu" in proc.stderr


def test_compile_a_kernel_of_other_template_parameters_is_one_sentence(tmp_path):
    path = tmp_path / "tiles.cu"
    path.write_text("template <int N>\n__global__ void tiles(float* y) { y[0] = N; }\n")
    proc = cli("cupy_ops", "compile", str(path))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "template" in proc.stderr
    assert "--name 'tiles<...>'" in proc.stderr
    proc = cli("cupy_ops", "compile", "--arch", "sm_90", str(path), "--name", "tiles<8>")
    assert proc.returncode == 0 and "1 of 1 kernel variants compiled" in proc.stdout, proc.stderr


def test_an_older_torch_is_an_import_error_naming_the_floor():
    code = ("import torch\ntorch.__version__ = '2.3.1'\n"
            "try:\n    import cupy_ops\nexcept ImportError as e:\n    print('ImportError:', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "ImportError: cupy_ops needs torch >= 2.4" in proc.stdout and "2.3.1" in proc.stdout, proc.stderr


@pytest.mark.gpu
def test_info_names_the_gpus(cuda):
    proc = subprocess.run([sys.executable, "-m", "cupy_ops", "info"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "cuda:0" in proc.stdout and "compute capability" in proc.stdout


def test_a_cupy_for_another_cuda_major_than_torchs_is_named(monkeypatch):
    import torch

    from cupy_ops.compiler import nvrtc

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(nvrtc, "_cupy_cuda_major", lambda: 12)
    msg = nvrtc.cuda_mismatch()
    assert "CUDA 13.0" in msg and "cupy-cuda12x" in msg and "cuda13 extra" in msg
    monkeypatch.setattr(nvrtc, "_cupy_cuda_major", lambda: 13)
    assert nvrtc.cuda_mismatch() is None
    monkeypatch.setattr(torch.version, "cuda", None)      # a CPU-only torch: nothing to match
    assert nvrtc.cuda_mismatch() is None


def test_warm_fills_the_kernel_cache_for_a_capability(tmp_path, monkeypatch):
    """``warm --capability`` compiles what a GPU of that capability would launch (the sm_90a
    sources only for 9.0), into the cache a first launch reads; a second run finds it all."""
    from cupy_ops.warm import _one, jobs_for

    hopper, ampere = jobs_for([(9, 0)]), jobs_for([(8, 0)])
    assert {arch for name, _, arch in hopper if name == "gemm_sm90a.cu"} == {"sm_90a"}
    assert {arch for name, _, arch in hopper if name == "relu.cu"} == {"sm_90"}
    assert not [j for j in ampere if j[0] == "gemm_sm90a.cu"] and ("relu.cu", "relu<float>", "sm_80") in ampere
    assert len(jobs_for([(9, 0), (9, 0)])) == len(hopper)
    env = {"CUPY_CACHE_DIR": str(tmp_path)}
    proc = cli("cupy_ops", "warm", "--capability", "8.0", "--jobs", "2", env=env)
    assert proc.returncode == 0, proc.stderr
    n = len(ampere)
    assert f"{n} kernel variants for compute capability 8.0: {n} compiled" in proc.stdout, proc.stdout
    # its progress: a line at the start, then one per tenth of the variants (not a terminal)
    progress = [line for line in proc.stderr.splitlines() if "kernel variants done" in line]
    assert progress[0].startswith(f"0/{n} ") and progress[-1].startswith(f"{n}/{n} ") and len(progress) >= 5
    proc = cli("cupy_ops", "warm", "--capability", "8.0", "--jobs", "2", env=env)
    assert f"0 compiled (0 s of NVRTC), {n} already cached, 0 failed" in proc.stdout, proc.stdout
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    assert _one(("relu.cu", "relu<float>", "sm_80")).cached   # the CLI's child processes wrote it


def test_warm_without_a_gpu_or_with_bad_arguments_is_one_sentence():
    proc = cli("cupy_ops", "warm")
    assert proc.returncode != 0 and "pass --capability, e.g. --capability 9.0" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = cli("cupy_ops", "warm", "--capability", "9")
    assert proc.returncode == 2 and "--capability must look like 9.0 or 8.6, got '9'" in proc.stderr
    for bad in ("0", "-2", "two"):
        proc = cli("cupy_ops", "warm", "--capability", "9.0", "--jobs", bad)
        assert proc.returncode == 2 and f"--jobs must be an integer >= 1, got '{bad}'" in proc.stderr


def test_kernel_names_see_launch_attributes():
    from cupy_ops.kernel import kernel_names, parse_signature

    code = ("/* __global__ void hidden(int) */ template <int C> __global__ void __cluster_dims__(C, 1, 1)\n"
            "__launch_bounds__(128, 1) a(float* x) {}\n__global__ void b(int n) {}\n"
            "__global__ void __launch_bounds__(64) a(float* x);\n"
            'template <class T> __launch_bounds__(256) __global__ void c(const T* x) {}\n'
            'extern "C" __global__ __launch_bounds__(128) void d(float* y) {}\n')
    assert kernel_names(code) == ["a", "b", "c", "d"]
    assert parse_signature(code, "a")[1] == [("ptr", "x", "float*")]
    assert parse_signature(code, "c") == ("T", [("ptr", "x", "const T*")])
    assert parse_signature(code, "d") == (None, [("ptr", "y", "float*")])


def test_bench_tables_mark_a_time_that_spread():
    """suite.format_rows / format_markdown: a time whose p80 / p20 exceeds SPREAD_FLAG carries
    "~", so does every ratio built on it (torch eager's included), and the table ends with the
    note saying what it means; a table of quiet times has neither."""
    from cupy_ops.bench import suite
    from cupy_ops.bench.timing import Stats

    def row(ours, eager):
        return suite.Row("matmul", "bfloat16", "1024x1024x1024", 6 << 20, 2 << 30, variants=[
            suite.Variant("cupy_ops wgmma (auto)", ours, 0.0, True), suite.Variant("torch eager", eager, 0.0, True)])

    quiet, noisy = Stats(1.0, 0.99, 1.01, 30), Stats(1.0, 0.9, 1.5, 30)
    torch_quiet, torch_noisy = Stats(2.0, 1.98, 2.02, 30), Stats(2.0, 1.8, 3.0, 30)

    def noted(table):   # the note: under the text table, above the Markdown one (wrapped)
        return table.endswith(suite.SPREAD_NOTE) or suite.SPREAD_NOTE[2:] in " ".join(table.split())

    for fmt in (suite.format_rows, lambda rows: suite.format_markdown(rows, {"gpu": "a GPU"})):
        assert "~" not in fmt([row(quiet, torch_quiet)])
        table = fmt([row(noisy, torch_quiet)])
        ours_line = next(line for line in table.splitlines() if "wgmma" in line)
        assert "1.0000 ~" in ours_line and "2.00x ~" in ours_line and noted(table)
        table = fmt([row(quiet, torch_noisy)])   # torch's time spread: our ratio to it is marked, our time not
        ours_line = next(line for line in table.splitlines() if "wgmma" in line)
        assert "1.0000 ~" not in ours_line and "2.00x ~" in ours_line and noted(table)
