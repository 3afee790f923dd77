"""The command line: ``python -m cupy_ops info``, ``--version``, ``compile`` (built-in sources and
user files: the same report for every ``--jobs``, sm_75 named as too old up front) and ``warm``,
and every ``python -m cupy_ops...`` entry point: ``--help`` works, and without a GPU (or without
CuPy) each fails in one sentence starting "error:", never a traceback, also run from the folder
holding a clone named ``cupy_ops``. CPU tests: they hide the GPU."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINTS = [
    "cupy_ops",
    "cupy_ops.bench",
    "cupy_ops.bench.host",
    "cupy_ops.bench.first_call",
    "cupy_ops.bench.prepacked",
]
NEEDS_GPU = ENTRY_POINTS[1:]


def cli(module, *args, env=None, cwd=ROOT):
    base = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=base, capture_output=True, text=True, timeout=600
    )


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
    assert len(lines) == 1 and lines[0].startswith("error: ") and "GPU" in lines[0], proc.stderr


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
    code = (
        "import cupy_ops.compiler as c\n"
        "try:\n    c.import_cupy()\nexcept ImportError as e:\n    print('ImportError:', e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=dict(os.environ, **no_cupy),
        capture_output=True,
        text=True,
        timeout=120,
    )
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


def test_compile_a_user_file_with_nvrtc_options(tmp_path):
    path = tmp_path / "blocked.cu"
    path.write_text('#ifndef BLOCK\n#error "BLOCK must be defined"\n#endif\n'
                    "__global__ void __launch_bounds__(BLOCK) blocked(float* y) { y[0] = BLOCK; }\n")  # fmt: skip
    proc = cli("cupy_ops", "compile", "--arch", "sm_90", str(path))
    assert proc.returncode == 1 and "BLOCK must be defined" in proc.stderr
    proc = cli("cupy_ops", "compile", "--arch", "sm_90", str(path), "--option=-DBLOCK=256", "--option=-lineinfo")
    assert proc.returncode == 0 and "1 of 1 kernel variants compiled for sm_90" in proc.stdout, proc.stderr
    proc = cli("cupy_ops", "compile", "--arch", "sm_90", str(path), "--option=-arch=sm_80")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "-arch=sm_80" in proc.stderr
    proc = cli("cupy_ops", "compile", "--option=-DBLOCK=256")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "--option needs a PATH.cu" in proc.stderr


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
    proc = cli(
        "cupy_ops",
        "compile",
        "--arch",
        "sm_80",
        "--arch",
        "sm_90",
        str(path),
        "--name",
        "twice",
        "--name",
        "tiles<4>",
        "--emit",
        "ptx",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "10 of 10 kernel variants compiled for sm_80, sm_90" in proc.stdout
    for stem in ("twice", "tiles_4"):
        for arch in ("sm_80", "sm_90"):
            out = tmp_path / f"{stem}.{arch}.ptx"  # next to PATH.cu
            assert f"wrote {out} (ptx for compute_{arch[3:]}; " in proc.stdout
            assert f".target {arch}" in out.read_text()
    assert (tmp_path / "twice.sm_90.ptx").read_text().count(".entry _Z5twice") == 4  # float, f16, bf16, double
    assert "tiles<4> = _Z5tilesILi4EEvPf" in proc.stdout
    folder = tmp_path / "out" / "sm_90"  # not there yet: made
    proc = cli(
        "cupy_ops", "compile", "--arch", "sm_90", str(path), "--name", "zero", "--emit", "cubin", "--out", str(folder)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (folder / "zero.sm_90.cubin").read_bytes()[:4] == b"\x7fELF" and "zero = zero" in proc.stdout


def test_compile_emit_errors_are_one_sentence(tmp_path):
    proc = cli("cupy_ops", "compile", "--emit", "ptx")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "--emit needs a PATH.cu" in proc.stderr
    path = tmp_path / "mine.cu"
    path.write_text(GOOD)
    (tmp_path / "a file").write_text("")
    proc = cli("cupy_ops", "compile", str(path), "--emit", "ptx", "--out", str(tmp_path / "a file"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "is a file, not a folder" in proc.stderr
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
    code = (
        "import torch\ntorch.__version__ = '2.3.1'\n"
        "try:\n    import cupy_ops\nexcept ImportError as e:\n    print('ImportError:', e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "ImportError: cupy_ops needs torch >= 2.4" in proc.stdout and "2.3.1" in proc.stdout, proc.stderr


@pytest.mark.gpu
def test_info_names_the_gpus(cuda):
    proc = subprocess.run(
        [sys.executable, "-m", "cupy_ops", "info"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
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
    monkeypatch.setattr(torch.version, "cuda", None)  # a CPU-only torch: nothing to match
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
    assert _one(("relu.cu", "relu<float>", "sm_80")).cached  # the CLI's child processes wrote it


def test_warm_without_a_gpu_or_with_bad_arguments_is_one_sentence():
    proc = cli("cupy_ops", "warm")
    assert proc.returncode != 0 and "pass --capability, e.g. --capability 9.0" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: ")
    proc = cli("cupy_ops", "warm", "--capability", "9")
    assert proc.returncode == 2 and "--capability must look like 9.0 or 8.6, got '9'" in proc.stderr
    for bad in ("0", "-2", "two"):
        proc = cli("cupy_ops", "warm", "--capability", "9.0", "--jobs", bad)
        assert proc.returncode == 2 and f"--jobs must be an integer >= 1, got '{bad}'" in proc.stderr


def test_kernel_names_see_launch_attributes():
    from cupy_ops.kernel import kernel_names, parse_signature

    code = (
        "/* __global__ void hidden(int) */ template <int C> __global__ void __cluster_dims__(C, 1, 1)\n"
        "__launch_bounds__(128, 1) a(float* x) {}\n__global__ void b(int n) {}\n"
        "__global__ void __launch_bounds__(64) a(float* x);\n"
        "template <class T> __launch_bounds__(256) __global__ void c(const T* x) {}\n"
        'extern "C" __global__ __launch_bounds__(128) void d(float* y) {}\n'
    )
    assert kernel_names(code) == ["a", "b", "c", "d"]
    assert parse_signature(code, "a")[1] == [("ptr", "x", "float*")]
    assert parse_signature(code, "c") == ("T", [("ptr", "x", "const T*")])
    assert parse_signature(code, "d") == (None, [("ptr", "y", "float*")])


def test_version():
    import cupy_ops

    proc = cli("cupy_ops", "--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"cupy_ops {cupy_ops.__version__}", proc.stderr


# --- compile: the same report for every --jobs ----------------------------------------------


def test_compile_a_few_builtin_sources_in_one_or_two_processes_gives_one_report():
    """``--source`` picks built-in sources; their variants split over two processes (two NVRTC
    programs a source) report what one process does, line for line."""
    args = ["compile", "--arch", "sm_80", "--source", "relu.cu", "--source", "relu_div.cu"]
    one, two = cli("cupy_ops", *args, "--jobs", "1"), cli("cupy_ops", *args, "--jobs", "2")
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    assert one.stdout.splitlines()[:-1] == two.stdout.splitlines()[:-1]
    last = one.stdout.splitlines()[-1]
    assert re.match(r"8 of 8 kernel variants compiled for sm_80 in [\d.]+ s with 1 process$", last), last
    assert two.stdout.splitlines()[-1].endswith("with 2 processes")
    assert {line.split()[0] for line in one.stdout.splitlines()[3:-1]} == {"relu.cu", "relu_div.cu"}


def test_compile_source_errors_are_one_sentence(tmp_path):
    proc = cli("cupy_ops", "compile", "--source", "nope.cu")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: --source nope.cu: no built-in source of that name; they are ")
    assert "gemm.cu" in proc.stderr
    path = tmp_path / "mine.cu"
    path.write_text(GOOD)
    proc = cli("cupy_ops", "compile", "--source", "relu.cu", str(path))
    assert proc.returncode != 0 and "--source picks built-in sources" in proc.stderr


TEMPLATE_WITH_AN_SM80_INSTANCE = textwrap.dedent("""
    template <int N>
    __global__ void k(float* y) {
      if (N == 2) asm volatile("cp.async.commit_group;");   // sm_80 and newer
      y[0] = N;
    }
""")


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_a_variant_that_fails_does_not_fail_those_compiled_with_it(jobs):
    """ptxas fails a whole program for one kernel's error: ``each_alone`` gives each variant its
    own result, so however the variants are split into programs (``--jobs``), the same ones
    compile (gemm.cu for sm_75: 34 of its 43 variants with any --jobs, where one program a
    source gave 0 with --jobs 1 and 21 with --jobs 2)."""
    from cupy_ops import compiler
    from cupy_ops.warm import each_alone

    src = compiler.Source("k.cu", TEMPLATE_WITH_AN_SM80_INSTANCE, (), None)
    exprs = ["k<1>", "k<2>", "k<3>", "k<4>"]
    whole = compiler.compile_offline(src, "sm_75", exprs)
    assert not any(r.ok for r in whole)  # the program failed as a whole
    bounds = [round(i * len(exprs) / jobs) for i in range(jobs + 1)]
    parts = [
        each_alone(src, "sm_75", compiler.compile_offline(src, "sm_75", exprs[a:b])) for a, b in zip(bounds, bounds[1:])
    ]
    assert [(r.expr, r.ok) for part in parts for r in part] == [
        ("k<1>", True),
        ("k<2>", False),
        ("k<3>", True),
        ("k<4>", True),
    ]
    failed = next(r for part in parts for r in part if not r.ok)
    assert "cp.async" in failed.log and "sm_80" in failed.log
    assert [r.ok for r in each_alone(src, "sm_80", compiler.compile_offline(src, "sm_80", exprs))] == [True] * 4


def test_compile_for_an_arch_before_sm_80_says_so_first():
    proc = cli("cupy_ops", "compile", "--arch", "sm_75", "--source", "relu.cu")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("note: cupy_ops kernels need sm_80 or newer: sm_75 lacks ")
    proc = cli("cupy_ops", "compile", "--arch", "sm_86", "--source", "relu.cu")
    assert proc.returncode == 0 and "sm_80 or newer" not in proc.stderr, proc.stderr


def test_a_failed_builtin_variant_shows_each_message_of_its_log_once():
    from cupy_ops.__main__ import _condensed

    log = "\n".join(
        [
            f"ptxas application ptx input, line {n}; error   : Feature 'cp.async' requires .target sm_80"
            for n in (117, 142, 185)
        ]
        + ["ptxas fatal   : Ptx assembly aborted due to errors"]
    )
    assert _condensed(log) == [
        "ptxas application ptx input, line 117; error   : Feature 'cp.async' requires .target sm_80 "
        "(and 2 more like it)",
        "ptxas fatal   : Ptx assembly aborted due to errors",
    ]


@pytest.mark.parametrize("jobs", [1, 2, 3, 8])
def test_compile_jobs_split_every_source_without_loss_or_reorder(jobs):
    from cupy_ops import compiler
    from cupy_ops.warm import builtin_compile_tasks

    tasks = builtin_compile_tasks(["sm_80", "sm_90"], jobs)
    for arch in ("sm_80", "sm_90"):
        for src in compiler.sources():
            parts = [t for t in tasks if t.arch == arch and t.source == src.name]
            assert 1 <= len(parts) <= jobs
            exprs = [e for t in parts for e in (t.exprs or src.variants)]
            assert exprs == list(src.variants)


def test_a_user_file_in_two_processes_gives_the_report_of_one(tmp_path):
    path = tmp_path / "mine.cu"
    path.write_text(GOOD)
    one = cli("cupy_ops", "compile", "--arch", "sm_80", "--arch", "sm_90", str(path), "--jobs", "1")
    two = cli("cupy_ops", "compile", "--arch", "sm_80", "--arch", "sm_90", str(path), "--jobs", "2")
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    assert one.stdout.splitlines()[:-1] == two.stdout.splitlines()[:-1]
    assert "10 of 10 kernel variants compiled" in two.stdout and two.stdout.splitlines()[-1].endswith("2 processes")


@pytest.mark.parametrize(
    "code", ["__global__ void k(float* p) { p[0] = undeclared; }", "__global__ void k(float* p) { p[0] = 1.0f; }"]
)
def test_compile_offline_log_has_no_c_string_terminator(code):
    import cupy_ops

    [r] = cupy_ops.Kernel(code, "k").compile_offline("sm_90")
    assert r.ok == ("undeclared" not in code)
    assert "\x00" not in r.log and r.log.strip(), repr(r.log[-40:])


def test_warm_progress_rewrites_one_line_on_a_terminal():
    from cupy_ops.__main__ import _progress

    class Terminal:
        text = ""

        def isatty(self):
            return True

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    term = Terminal()
    show = _progress(term)
    for done in range(4):
        show(done, 3)
    assert term.text.count("\r") == 4 and term.text.endswith("3/3 kernel variants done (0 s)\n")
    assert term.text.count("\n") == 1


def test_warm_for_a_capability_before_8_0_says_so_first(monkeypatch, capsys):
    from cupy_ops import __main__ as cli_main

    monkeypatch.setattr("cupy_ops.warm.warm", lambda caps, jobs, progress=None: [])  # compiles nothing
    monkeypatch.setattr(cli_main, "_nvrtc_version", lambda: (13, 0))
    assert cli_main.main(["warm", "--capability", "7.5", "--capability", "9.0"]) == 0
    assert capsys.readouterr().err.startswith("note: cupy_ops kernels need sm_80 or newer: sm_75 lacks ")
    assert cli_main.main(["warm", "--capability", "8.0"]) == 0
    assert "sm_80 or newer" not in capsys.readouterr().err


# --- run from the folder that holds a clone named cupy_ops ----------------------------------


def test_a_folder_named_cupy_ops_here_does_not_break_the_command_line(tmp_path):
    """Run from the folder that holds a clone named cupy_ops, an editable install (pip install
    -e, the README's) is hidden by the clone's root; the command line still works and says so."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = [sys.executable, "-c", "import cupy_ops; print(getattr(cupy_ops, '__file__', None))"]
    installed = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    if installed.returncode != 0:
        pytest.skip("cupy_ops is not installed here (only put on PYTHONPATH), so nothing can hide it")
    (tmp_path / "cupy_ops").mkdir()  # a clone's root: no __init__.py
    (tmp_path / "cupy_ops" / "README.md").write_text("a clone\n")
    hidden = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    proc = subprocess.run(
        [sys.executable, "-m", "cupy_ops", "info"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert re.search(r"^cupy_ops +\d+\.\d+", proc.stdout, re.MULTILINE), proc.stdout
    if hidden.stdout.strip() == "None":  # an editable install: the folder stood in for the package
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "hides the installed cupy_ops" in lines[0], proc.stderr
    results = ROOT / "benchmarks" / "results" / "h100.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "cupy_ops.bench", "--from-json", str(results), "--problem", "relu"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "4096x393216" in proc.stdout, proc.stderr


def test_the_prepacked_benchmark_names_a_bad_shape():
    proc = cli("cupy_ops.bench.prepacked", "--shape", "128x0x4")
    assert proc.returncode == 2 and "a shape is MxKxN of positive integers, got '128x0x4'" in proc.stderr
