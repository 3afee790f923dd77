"""What a newcomer meets on a machine without a GPU, on the CPU: reading benchmark results back
(``python -m cupy_ops.bench --from-json``: its errors, Markdown, plot; the results file per
card and README's table generated from it), the command line run from the folder that holds a
clone named ``cupy_ops``, ``compile --jobs`` and ``warm``'s progress, NVRTC's log as text, and
pytest's one line for the tests skipped for want of a GPU."""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import GPU_REASON
from cupy_ops.bench import results, suite
from cupy_ops.bench.__main__ import main as bench_main
from cupy_ops.bench.timing import Stats

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "benchmarks" / "results" / "h100.jsonl"
README_TABLE = re.compile(r"^<!-- bench-table:begin -->\n(.*?)^<!-- bench-table:end -->$", re.MULTILINE | re.DOTALL)


def cli(module, *args, cwd=ROOT, env=None):
    base = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=base, capture_output=True, text=True,
                          timeout=600)


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


# --- python -m cupy_ops.bench --from-json: user errors are one line and exit 2 ------------

def test_from_json_of_a_missing_file_is_one_line(tmp_path, capsys):
    assert bench_main(["--from-json", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl: no such file" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize("text", ["{not json", '{"problem": "relu"}\n', "[1, 2]\n", ""])
def test_from_json_of_something_else_is_one_line(tmp_path, capsys, text):
    path = tmp_path / "bench.jsonl"
    path.write_text(text)
    assert bench_main(["--from-json", str(path)]) == 2
    assert "is not a benchmark result file" in one_line(capsys.readouterr().err)


def test_plot_without_matplotlib_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # as where the bench extra is not installed
    png = tmp_path / "x.png"
    assert bench_main(["--from-json", str(H100), "--plot", str(png)]) == 2
    assert 'pip install "cupy_ops[bench]"' in one_line(capsys.readouterr().err)
    assert not png.exists()


def test_from_json_writes_the_markdown_table(tmp_path, capsys):
    out = tmp_path / "table.md"
    assert bench_main(["--from-json", str(H100), "--markdown", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert "| problem | dtype | shape (MxKxN) | cupy_ops | ms | TFLOP/s | % peak | torch eager ms | vs torch |" in lines
    # one line per case: float32 the fastest kernel at fp32 accuracy, the others "auto"'s
    rows, env, _ = results.read(H100)
    gemm_cases = [r for r in rows if r.problem in suite.GEMM_PROBLEMS]
    table = [line for line in lines if line.startswith("| matmul |") or line.startswith("| linear_relu_div |")]
    assert len(table) == len(gemm_cases) == 28
    assert any(line.startswith("| matmul | float32 | 4096x4096x4096 | `matmul` (fp16x3) |") for line in table)
    assert any(line.startswith("| matmul | float32 | 32*(1024x128x1024) | `matmul` (simt; auto) |") for line in table)
    assert sum(line.startswith("| matmul | bfloat16 |") for line in table) == 4
    assert not any("naive" in line or " tc" in line or "cuBLAS" in line for line in table)
    # as measured, its spread marked
    assert any(line.endswith(" ~ |") for line in table) == any(" ~ " in line for line in table)
    assert lines[0].startswith("NVIDIA H100 80GB HBM3, commits 1d70d9d (2026-11-27), 9c8c6de (2026-11-27)")
    elementwise = tmp_path / "elementwise.md"
    assert bench_main(["--from-json", str(H100), "--problem", "relu", "--markdown", str(elementwise)]) == 0
    assert "| relu | float32 | 4096x393216 | cupy_ops | 4.2612 | 4.2734 | - | 99.8 | - | 1.00x | - | yes |" in \
        elementwise.read_text().splitlines()


def test_from_json_redraws_the_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib (the bench extra)")
    png = tmp_path / "bench.png"
    assert bench_main(["--from-json", str(H100), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_readme_bench_table_is_generated_from_the_results_file():
    m = README_TABLE.search((ROOT / "README.md").read_text())
    if not m:
        pytest.skip("README.md has no <!-- bench-table:begin --> / <!-- bench-table:end --> lines around its "
                    "matrix-ops table yet")
    rows, env, _ = results.read(H100)
    assert m.group(1).strip() == suite.format_markdown(rows, env).strip(), (
        "README's bench table is not the one of benchmarks/results/h100.jsonl: put the output of "
        "python -m cupy_ops.bench --from-json benchmarks/results/h100.jsonl --markdown OUT.md between the lines")


def test_the_h200_table_in_docs_is_generated_from_its_results_file():
    """docs/benchmarks.md's "Matrix ops, H200" table is h200.jsonl's GEMM cases read back, the
    latest run of each (README links it)."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    section = text[text.index("## Matrix ops, H200"):]
    section = section[:section.index("\n## ", 1)]
    rows, env, _ = results.read(ROOT / "benchmarks" / "results" / "h200.jsonl")
    rows = [r for r in rows if r.problem in suite.GEMM_PROBLEMS]
    table = suite.format_markdown(rows, env).strip()
    assert table in section, "python -m cupy_ops.bench --from-json benchmarks/results/h200.jsonl --problem matmul " \
                             "--problem linear_relu_div --markdown OUT.md gives another table"
    assert "docs/benchmarks.md#matrix-ops-h200" in (ROOT / "README.md").read_text()


# --- the results file: JSON lines, one measurement a line, the environment on each --------

ENV = {"commit": "abc1234", "date": "2026-01-02", "gpu": "NVIDIA H100 80GB HBM3", "driver": "580.1",
       "torch": "2.11.0", "cupy": "14.2.0", "nvrtc": "13.0", "cuda": "13.0", "capability": "9.0", "sm_count": 132,
       "cupy_ops": "0.1.0", "python": "3.12.3"}


def _rows():
    gemm = suite.Row("matmul", "bfloat16", "1024x1024x1024", 6 << 20, 2 << 30, variants=[
        suite.Variant("cupy_ops wgmma (auto)", Stats(0.01, 0.0098, 0.0101, 100), 0.0, True),
        suite.Variant("cupy_ops naive", None, error="RuntimeError: broke"),
        suite.Variant("torch eager", Stats(0.02, 0.015, 0.03, 100), 0.0, True)])
    relu = suite.Row("relu", "float32", "1024x8192", 1 << 26, 0, copy=Stats(0.027, 0.0269, 0.0278, 100), variants=[
        suite.Variant("cupy_ops", Stats(0.027, 0.0267, 0.0278, 100), 0.0, True),
        suite.Variant("torch eager", Stats(0.027, 0.0268, 0.0278, 100), 0.0, True)])
    return [gemm, relu]


def test_results_file_round_trip(tmp_path):
    path = tmp_path / "h100.jsonl"
    host = {"torch.relu(x)": 9.5, "cupy_ops.relu(x)": 12.0}
    results.write(path, results.to_records(_rows(), ENV, host, runs=100, max_seconds=3.0))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 3 + 1 + 2 + 2   # gemm variants, the copy, relu variants, host overhead
    for line in lines:
        assert {k: line[k] for k in ENV} == ENV
        assert {"problem", "dtype", "shape", "variant", "ms", "ratio"} <= set(line)
    ours = next(line for line in lines if line["variant"] == "cupy_ops wgmma (auto)")
    assert ours["ratio"] == pytest.approx(2.0) and ours["ratio_spread"] and not ours["spread"]
    assert ours["flops"] == 2 << 30 and ours["p20"] == 0.0098 and ours["bitwise_equal"] is True
    rows, env, back_host = results.read(path)
    assert rows == _rows() and back_host == pytest.approx(host)
    assert env["gpu"] == ENV["gpu"] and env["runs"] == [("abc1234", "2026-01-02")]


def test_a_later_line_replaces_an_earlier_one(tmp_path):
    path = tmp_path / "h100.jsonl"
    records = results.to_records(_rows(), ENV)
    rerun = dict(records[0], commit="def5678", ms=0.009)
    results.write(path, records + [rerun])
    rows, env, _ = results.read(path)
    assert rows[0].variants[0].stats.median == 0.009 and [v.name for v in rows[0].variants] == \
        [v.name for v in _rows()[0].variants]
    assert env["runs"] == [("abc1234", "2026-01-02"), ("def5678", "2026-01-02")]


def test_the_older_single_json_files_are_read(tmp_path):
    from dataclasses import asdict

    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"environment": {"gpu": "NVIDIA H200"}, "host_overhead_us": None,
                                "rows": [asdict(r) for r in _rows()]}))
    rows, env, host = results.read(path)
    assert rows == _rows() and env["gpu"] == "NVIDIA H200" and host == {}


def test_h100_results_file_holds_full_runs_as_measured():
    """Every line an H100's with its versions; the 1d70d9d run measured every case of the earlier
    one (ba22bcd) and the batched ones, 68dfab0 every GEMM case again (after fp16x3's shift
    along K), and 9c8c6de every GEMM case again (after B's t and column keys in one read), its
    16-bit and TF32 ones twice: the tables read back are the 1d70d9d and 9c8c6de runs'."""
    lines = [json.loads(line) for line in H100.read_text().splitlines()]
    for line in lines:
        assert (line["date"], line["gpu"]) == ("2026-11-27", "NVIDIA H100 80GB HBM3")
        assert line["driver"] and line["torch"] and line["cupy"] and line["nvrtc"]
    table = [line for line in lines if line["problem"] not in (results.HOST, results.FIRST_CALL, results.KERNELBENCH)]
    cases = {}
    for line in table:
        cases.setdefault(line["commit"], set()).add((line["problem"], line["dtype"], line["shape"]))
    assert len(cases["ba22bcd"]) == 46 and cases["ba22bcd"] < cases["1d70d9d"]
    assert {c for c in cases["1d70d9d"] if "*" in c[2]} >= {("matmul", "bfloat16", "32*(1024x128x1024)"),
                                                            ("linear_relu_div", "float16", "8*(512x4096x4096)")}
    gemm = {c for c in cases["1d70d9d"] if c[0] in suite.GEMM_PROBLEMS}
    assert gemm == cases["68dfab0"] == cases["9c8c6de"]
    _, env, _ = results.read(H100)
    assert [commit for commit, _ in env["runs"]] == ["1d70d9d", "9c8c6de"]


def test_bench_json_writes_the_results_file(tmp_path, monkeypatch):
    """``--json PATH`` of a run: JSON lines with the environment and the UTC date on each
    (the measurement replaced: this machine has no GPU)."""
    import cupy_ops.bench.__main__ as bench_cli

    monkeypatch.setattr(bench_cli, "gpu_problem", lambda: None)
    monkeypatch.setattr(suite, "environment", lambda: dict(ENV))
    monkeypatch.setattr(suite, "run", lambda *a, **k: _rows())
    path = tmp_path / "run.jsonl"
    assert bench_cli.main(["--no-host", "--json", str(path)]) == 1   # the naive variant failed
    rows, env, _ = results.read(path)
    assert rows == _rows() and env["commit"] == "abc1234"


def test_the_environment_has_a_short_commit_and_the_utc_date(monkeypatch):
    from datetime import datetime, timezone

    from cupy_ops.bench import env

    monkeypatch.delenv("CUPY_OPS_COMMIT", raising=False)
    e = env.environment()
    assert e["date"] == datetime.now(timezone.utc).strftime("%Y-%m-%d")
    if (ROOT / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{7,12}( \+ uncommitted changes)?", e["commit"]), e["commit"]
    monkeypatch.setenv("CUPY_OPS_COMMIT", "1234567")
    assert env.environment()["commit"] == "1234567"


# --- the command line run from the folder that holds a clone named cupy_ops ---------------

def test_a_folder_named_cupy_ops_here_does_not_break_the_command_line(tmp_path):
    """Run from the folder that holds a clone named cupy_ops, an editable install (pip install
    -e, the README's) is hidden by the clone's root; the command line still works and says so."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = [sys.executable, "-c", "import cupy_ops; print(getattr(cupy_ops, '__file__', None))"]
    installed = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    if installed.returncode != 0:
        pytest.skip("cupy_ops is not installed here (only put on PYTHONPATH), so nothing can hide it")
    (tmp_path / "cupy_ops").mkdir()   # a clone's root: no __init__.py
    (tmp_path / "cupy_ops" / "README.md").write_text("a clone\n")
    hidden = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    proc = subprocess.run([sys.executable, "-m", "cupy_ops", "info"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert re.search(r"^cupy_ops +\d+\.\d+", proc.stdout, re.MULTILINE), proc.stdout
    if hidden.stdout.strip() == "None":   # an editable install: the folder stood in for the package
        assert "hides the installed cupy_ops" in one_line(proc.stderr)
    proc = subprocess.run([sys.executable, "-m", "cupy_ops.bench", "--from-json", str(H100), "--problem", "relu"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "4096x393216" in proc.stdout, proc.stderr


# --- compile --jobs, warm's progress ------------------------------------------------------

TWO_KERNELS = textwrap.dedent("""
    template <class T>
    __global__ void twice(const T* x, T* y, long long n) {
      long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
      if (i < n) y[i] = from_float<T>(2.0f * to_float(x[i]));
    }
    extern "C" __global__ void zero(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 0.0f; }
""")


def test_compile_in_two_processes_gives_the_report_of_one(tmp_path):
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
    path = tmp_path / "mine.cu"
    path.write_text(TWO_KERNELS)
    one = cli("cupy_ops", "compile", "--arch", "sm_80", "--arch", "sm_90", str(path), "--jobs", "1")
    two = cli("cupy_ops", "compile", "--arch", "sm_80", "--arch", "sm_90", str(path), "--jobs", "2")
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    assert one.stdout.splitlines()[:-1] == two.stdout.splitlines()[:-1]
    assert one.stdout.splitlines()[-1].endswith("with 1 process")
    assert two.stdout.splitlines()[-1].endswith("with 2 processes")
    assert "10 of 10 kernel variants compiled" in two.stdout


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


# --- NVRTC's log is text ------------------------------------------------------------------

@pytest.mark.parametrize("code", ["__global__ void k(float* p) { p[0] = undeclared; }",
                                  "__global__ void k(float* p) { p[0] = 1.0f; }"])
def test_compile_offline_log_has_no_c_string_terminator(code):
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
    import cupy_ops

    [r] = cupy_ops.Kernel(code, "k").compile_offline("sm_90")
    assert r.ok == ("undeclared" not in code)
    assert "\x00" not in r.log and r.log.strip(), repr(r.log[-40:])


# --- pytest without a GPU: one line for the GPU skips -------------------------------------

def test_without_a_gpu_the_gpu_skips_are_one_summary_line(tmp_path):
    if GPU_REASON is None:
        pytest.skip("a GPU is present: no test is skipped for want of one")
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -rs\nmarkers =\n    gpu: needs a GPU\n")
    (tmp_path / "test_some.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.gpu
        @pytest.mark.parametrize("i", range(3))
        def test_marked(i):
            pass

        def test_fixture(cuda):
            pass

        def test_other_reason():
            pytest.skip("not this one")

        def test_runs():
            pass
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert out.count(GPU_REASON) == 1 and f"4 GPU tests skipped: {GPU_REASON}" in out.splitlines(), out
    assert re.search(r"^SKIPPED \[1\] test_some.py:\d+: not this one$", out, re.MULTILINE), out
    assert "1 passed, 5 skipped" in out.splitlines()[-1]


def test_first_call_and_kernelbench_lines_are_kept_but_not_read_as_table_rows(tmp_path):
    """A results file holds first-call and KernelBench-evaluator lines beside the table's: each
    with the environment and the key the claims name; no table row is made of them."""
    lines = [results.record(ENV, results.FIRST_CALL, "float32", "relu", "cupy_ops empty cache", 150.0),
             results.record(ENV, results.KERNELBENCH, "float32", "level1/1", "ModelNew", 0.75, ratio=3.6),
             results.record(ENV, results.HOST, "float32", "4096", "relu: cupy_ops", 0.0107)]
    path = tmp_path / "h200.jsonl"
    results.append(path, lines[:2])
    results.append(path, lines[2:])
    rows, env, host = results.read(path)
    assert rows == [] and host == pytest.approx({"relu: cupy_ops": 10.7}) and env["gpu"] == ENV["gpu"]
    first = json.loads(path.read_text().splitlines()[0])
    assert {k: first[k] for k in ENV} == ENV
    assert (first["problem"], first["shape"], first["variant"], first["ms"]) == \
        ("first_call", "relu", "cupy_ops empty cache", 150.0)
    assert first["ratio"] is None and first["spread"] is False
