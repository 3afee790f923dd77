"""Benchmark results on the CPU: the results file (JSON lines, one measurement a line, the
environment on each) written and read back; ``python -m cupy_ops.bench --from-json``: its errors
in one line, its table, Markdown and plot, each output's path printed; variants told apart by
their fields; the committed results files and docs' tables generated from them."""

import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cupy_ops.bench import cases, report, results, running
from cupy_ops.bench.__main__ import main as bench_main
from cupy_ops.bench.timing import Stats

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "benchmarks" / "results" / "h100.jsonl"
H200 = ROOT / "benchmarks" / "results" / "h200.jsonl"
ENV = {
    "commit": "abc1234",
    "date": "2026-01-02",
    "gpu": "NVIDIA H100 80GB HBM3",
    "driver": "580.1",
    "torch": "2.11.0",
    "cupy": "14.2.0",
    "nvrtc": "13.0",
    "cuda": "13.0",
    "capability": "9.0",
    "sm_count": 132,
    "cupy_ops": "0.1.0",
    "python": "3.12.3",
}


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def _rows():
    gemm = cases.Row(
        "matmul",
        "bfloat16",
        "1024x1024x1024",
        6 << 20,
        2 << 30,
        variants=[
            cases.Variant("cupy_ops wgmma (auto)", Stats(0.01, 0.0098, 0.0101, 100), 0.0, True),
            cases.Variant("cupy_ops naive", None, error="RuntimeError: broke"),
            cases.Variant("torch eager", Stats(0.02, 0.015, 0.03, 100), 0.0, True),
        ],
    )
    relu = cases.Row(
        "relu",
        "float32",
        "1024x8192",
        1 << 26,
        0,
        copy=Stats(0.027, 0.0269, 0.0278, 100),
        variants=[
            cases.Variant("cupy_ops", Stats(0.027, 0.0267, 0.0278, 100), 0.0, True),
            cases.Variant("torch eager", Stats(0.027, 0.0268, 0.0278, 100), 0.0, True),
        ],
    )
    return [gemm, relu]


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
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as where the bench extra is not installed
    png = tmp_path / "x.png"
    assert bench_main(["--from-json", str(H100), "--plot", str(png)]) == 2
    assert 'pip install "cupy_ops[bench]"' in one_line(capsys.readouterr().err)
    assert not png.exists()


# --- --from-json's outputs ------------------------------------------------------------------


def test_from_json_writes_the_markdown_table_and_says_where(tmp_path, capsys):
    out = tmp_path / "table.md"
    assert bench_main(["--from-json", str(H100), "--markdown", str(out)]) == 0
    assert f"wrote {out} (README's table)" in capsys.readouterr().out.splitlines()
    lines = out.read_text().splitlines()
    assert "| problem | dtype | shape (MxKxN) | cupy_ops | ms | TFLOP/s | % peak | torch eager ms | vs torch |" in lines
    # one line per case: float32 the fastest kernel at fp32 accuracy, the others "auto"'s
    rows, env, _ = results.read(H100)
    gemm_cases = [r for r in rows if r.problem in cases.GEMM_PROBLEMS]
    table = [line for line in lines if line.startswith("| matmul |") or line.startswith("| linear_relu_div |")]
    assert len(table) == len(gemm_cases) == 28
    assert any(line.startswith("| matmul | float32 | 4096x4096x4096 | `matmul` (fp16x3) |") for line in table)
    assert any(line.startswith("| matmul | float32 | 32*(1024x128x1024) | `matmul` (simt; auto) |") for line in table)
    assert sum(line.startswith("| matmul | bfloat16 |") for line in table) == 4
    assert not any("naive" in line or " tc" in line or "cuBLAS" in line for line in table)
    # as measured, its spread marked
    assert any(line.endswith(" ~ |") for line in table) == any(" ~ " in line for line in table)
    # the GPU and each run the table's lines come from (commit and date), as the file says
    runs = ", ".join(f"{commit} ({date})" for commit, date in env["runs"])
    assert " ".join(lines[:3]).startswith(f"{env['gpu']}, commit{'s' if len(env['runs']) > 1 else ''} {runs}")
    elementwise = tmp_path / "elementwise.md"
    assert bench_main(["--from-json", str(H100), "--problem", "relu", "--markdown", str(elementwise)]) == 0
    assert (
        "| relu | float32 | 4096x393216 | cupy_ops | 4.2612 | 4.2734 | - | 99.8 | - | 1.00x | - | yes |"
        in elementwise.read_text().splitlines()
    )


def test_from_json_redraws_the_plot_and_says_where(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib (the bench extra)")
    png = tmp_path / "bench.png"
    assert bench_main(["--from-json", str(H100), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png} (speedup vs size)" in capsys.readouterr().out.splitlines()


def test_the_plot_legends_lie_outside_the_data():
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib (the bench extra)")
    import matplotlib

    matplotlib.use("Agg")
    from cupy_ops.bench.plot import plot

    rows, _, _ = results.read(H100)
    fig = plot(rows, None, "title")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes]
    assert len(legends) == 2 and None not in legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), (box, ax.get_title())


def test_plotted_series_are_the_default_kernels_and_the_modelnew_ones():
    """The plot's lines: the elementwise kernels, each GEMM family "auto" picks, fp16x3 and
    tf32x3 (the float32 ModelNews') and cuBLAS + relu_div (dashed): told apart by the variants'
    fields."""
    from cupy_ops.bench.plot import series

    rows, _, _ = results.read(H100)
    elementwise, gemm = series(rows)
    assert set(elementwise) == {f"{p} {d}" for p in ("relu", "relu_div") for d in ("float32", "float16", "bfloat16")}
    assert "matmul float32, fp16x3" in gemm and "matmul float32, tf32x3" in gemm
    assert "matmul bfloat16, wgmma (auto)" in gemm and "linear_relu_div float32, fused fp16x3" in gemm
    assert not [label for label in gemm if "naive" in label or label.endswith(" simt")]
    dashed = {label for label, (d, _) in gemm.items() if d}
    assert dashed and all(label.endswith(", cuBLAS + cupy_ops.relu_div") for label in dashed)


# --- variants: explicit fields, the name made from them ------------------------------------


@pytest.mark.parametrize(
    "name, fields",
    [
        ("cupy_ops", (cases.OURS, None, False, False)),
        ("cupy_ops wgmma (auto)", (cases.OURS, "wgmma", True, False)),
        ("cupy_ops fused fp16x3", (cases.OURS, "fp16x3", False, True)),
        ("cupy_ops fused simt (auto)", (cases.OURS, "simt", True, True)),
        ("cuBLAS + cupy_ops.relu_div", (cases.CUBLAS, None, False, False)),
        ("torch eager", (cases.EAGER, None, False, False)),
        ("torch.compile", (cases.COMPILED, None, False, False)),
        ("cupy_ops wgmma (auto) or so", (cases.OTHER, None, False, False)),
    ],
)
def test_a_variant_name_gives_its_fields_and_back(name, fields):
    v = cases.Variant(name)
    assert (v.kind, v.family, v.auto, v.fused) == fields
    if v.kind != cases.OTHER:
        assert cases.Variant.of(v.kind, v.family, v.auto, v.fused) == v


def test_the_headline_is_chosen_by_fields_not_by_words_in_the_name():
    """README's float32 row: the fastest fp32-accurate family; 16-bit: the one "auto" picks. A
    variant whose name merely contains "(auto)" or "fp16x3" is none of them."""
    fast, slow = Stats(1.0, 1.0, 1.0, 10), Stats(2.0, 2.0, 2.0, 10)
    decoy = cases.Variant("cupy_ops fp16x3 (auto)", fast, kind=cases.OTHER, family=None, auto=False, fused=False)
    row = cases.Row(
        "matmul",
        "float32",
        "1x1x1",
        1,
        1,
        variants=[decoy, cases.Variant.of(cases.OURS, "tf32x3"), cases.Variant.of(cases.OURS, "simt", auto=True)],
    )
    row.variants[1].stats, row.variants[2].stats = slow, fast
    assert report.headline(row) is row.variants[2]
    row.dtype = "bfloat16"
    assert report.headline(row) is row.variants[2]
    row.variants[2].auto = False
    assert report.headline(row) is None


# --- the results file -----------------------------------------------------------------------


def test_results_file_round_trip(tmp_path):
    path = tmp_path / "h100.jsonl"
    host = {"torch.relu(x)": 9.5, "cupy_ops.relu(x)": 12.0}
    results.write(path, results.to_records(_rows(), ENV, host, runs=100, max_seconds=3.0))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 3 + 1 + 2 + 2  # gemm variants, the copy, relu variants, host overhead
    for line in lines:
        assert {k: line[k] for k in ENV} == ENV
        assert {"problem", "dtype", "shape", "variant", "ms", "ratio"} <= set(line)
    ours = next(line for line in lines if line["variant"] == "cupy_ops wgmma (auto)")
    assert ours["ratio"] == pytest.approx(2.0) and ours["ratio_spread"] and not ours["spread"]
    assert ours["flops"] == 2 << 30 and ours["p20"] == 0.0098 and ours["bitwise_equal"] is True
    rows, env, back_host = results.read(path)
    assert rows == _rows() and back_host == pytest.approx(host)
    assert env["gpu"] == ENV["gpu"] and env["runs"] == [(ENV["commit"], ENV["date"])]


def test_a_later_line_replaces_an_earlier_one(tmp_path):
    path = tmp_path / "h100.jsonl"
    records = results.to_records(_rows(), ENV)
    rerun = dict(records[0], commit="def5678", ms=0.009)
    results.write(path, [*records, rerun])
    rows, env, _ = results.read(path)
    assert rows[0].variants[0].stats.median == 0.009 and [v.name for v in rows[0].variants] == [
        v.name for v in _rows()[0].variants
    ]
    assert env["runs"] == [(ENV["commit"], ENV["date"]), ("def5678", ENV["date"])]


def test_the_older_single_json_files_are_read(tmp_path):
    from dataclasses import asdict

    path = tmp_path / "bench.json"
    path.write_text(
        json.dumps(
            {"environment": {"gpu": "NVIDIA H200"}, "host_overhead_us": None, "rows": [asdict(r) for r in _rows()]}
        )
    )
    rows, env, host = results.read(path)
    assert rows == _rows() and env["gpu"] == "NVIDIA H200" and host == {}


def test_first_call_and_kernelbench_lines_are_kept_but_not_read_as_table_rows(tmp_path):
    """A results file holds first-call and KernelBench-evaluator lines beside the table's: each
    with the environment and the key the claims name; no table row is made of them."""
    lines = [
        results.record(ENV, results.FIRST_CALL, "float32", "relu", "cupy_ops empty cache", 150.0),
        results.record(ENV, results.KERNELBENCH, "float32", "level1/1", "ModelNew", 0.75, ratio=3.6),
        results.record(ENV, results.HOST, "float32", "4096", "relu: cupy_ops", 0.0107),
        results.record(ENV, results.PREPACKED, "float32", "128x32768x32768", "cupy_ops accurate prepacked", 1.6),
    ]
    path = tmp_path / "h200.jsonl"
    results.append(path, lines[:2])
    results.append(path, lines[2:])
    rows, env, host = results.read(path)
    assert rows == [] and host == pytest.approx({"relu: cupy_ops": 10.7}) and env["gpu"] == ENV["gpu"]
    first = json.loads(path.read_text().splitlines()[0])
    assert {k: first[k] for k in ENV} == ENV
    assert (first["problem"], first["shape"], first["variant"], first["ms"]) == (
        "first_call",
        "relu",
        "cupy_ops empty cache",
        150.0,
    )
    assert first["ratio"] is None and first["spread"] is False


@pytest.mark.parametrize("path", [H100, H200], ids=["h100", "h200"])
def test_a_committed_results_file_holds_whole_runs_with_their_environment(path):
    """Every line names its commit, date, card and versions, one card a file; each table case
    read back compares cupy_ops with torch eager timed in the same run (commit)."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len({line["gpu"] for line in lines}) == 1
    for line in lines:
        assert all(line[k] for k in ("commit", "date", "gpu", "driver", "torch", "cupy", "nvrtc")), line
        assert re.fullmatch(r"[0-9a-f]{7,12}", line["commit"]) and re.fullmatch(r"\d{4}-\d\d-\d\d", line["date"])
    kept = {}
    for line in lines:
        kept[(line["problem"], line["dtype"], line["shape"], line["variant"])] = line["commit"]
    rows, _, _ = results.read(path)
    for r in rows:
        eager = kept[(r.problem, r.dtype, r.shape, cases.EAGER)]
        for v in r.variants:
            if v.kind == cases.OURS and v.ran:
                assert kept[(r.problem, r.dtype, r.shape, v.name)] == eager, (r.problem, r.dtype, r.shape, v.name)


def test_the_h200_table_in_docs_is_generated_from_its_results_file():
    """docs/benchmarks.md's "Matrix ops, H200" table is h200.jsonl's GEMM cases read back, the
    latest run of each (README links it)."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    section = text[text.index("## Matrix ops, H200") :]
    section = section[: section.index("\n## ", 1)]
    rows, env, _ = results.read(H200)
    rows = [r for r in rows if r.problem in cases.GEMM_PROBLEMS]
    table = report.format_markdown(rows, env).strip()
    assert table in section, (
        "python -m cupy_ops.bench --from-json benchmarks/results/h200.jsonl --problem matmul "
        "--problem linear_relu_div --markdown OUT.md gives another table"
    )
    assert "docs/benchmarks.md#matrix-ops-h200" in (ROOT / "README.md").read_text()


# --- a run's outputs (the measurement replaced: this machine has no GPU) -------------------


def test_bench_json_writes_the_results_file_and_says_where(tmp_path, monkeypatch, capsys):
    """``--json PATH`` of a run: JSON lines with the environment and the UTC date on each."""
    import cupy_ops.bench.__main__ as bench_cli

    monkeypatch.setattr(bench_cli, "gpu_problem", lambda: None)
    monkeypatch.setattr(bench_cli, "environment", lambda: dict(ENV))
    monkeypatch.setattr(running, "run", lambda *a, **k: _rows())
    path = tmp_path / "run.jsonl"
    assert bench_cli.main(["--no-host", "--json", str(path)]) == 1  # the naive variant failed
    assert f"wrote {path} (every measurement, JSON lines)" in capsys.readouterr().out.splitlines()
    rows, env, _ = results.read(path)
    assert rows == _rows() and env["commit"] == ENV["commit"]


def test_the_environment_has_a_short_commit_and_the_utc_date(monkeypatch):
    from cupy_ops.bench import env

    monkeypatch.delenv("CUPY_OPS_COMMIT", raising=False)
    e = env.environment()
    assert e["date"] == datetime.now(timezone.utc).strftime("%Y-%m-%d")
    if (ROOT / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{7,12}( \+ uncommitted changes)?", e["commit"]), e["commit"]
    monkeypatch.setenv("CUPY_OPS_COMMIT", "1234567")
    assert env.environment()["commit"] == "1234567"


def test_bench_tables_mark_a_time_that_spread():
    """report.format_rows / format_markdown: a time whose p80 / p20 exceeds SPREAD_FLAG carries
    "~", so does every ratio built on it (torch eager's included), and the table ends with the
    note saying what it means; a table of quiet times has neither."""

    def row(ours, eager):
        return cases.Row(
            "matmul",
            "bfloat16",
            "1024x1024x1024",
            6 << 20,
            2 << 30,
            variants=[
                cases.Variant("cupy_ops wgmma (auto)", ours, 0.0, True),
                cases.Variant("torch eager", eager, 0.0, True),
            ],
        )

    quiet, noisy = Stats(1.0, 0.99, 1.01, 30), Stats(1.0, 0.9, 1.5, 30)
    torch_quiet, torch_noisy = Stats(2.0, 1.98, 2.02, 30), Stats(2.0, 1.8, 3.0, 30)

    def noted(table):  # the note: under the text table, above the Markdown one (wrapped)
        return table.endswith(report.SPREAD_NOTE) or report.SPREAD_NOTE[2:] in " ".join(table.split())

    for fmt in (report.format_rows, lambda rows: report.format_markdown(rows, {"gpu": "a GPU"})):
        assert "~" not in fmt([row(quiet, torch_quiet)])
        table = fmt([row(noisy, torch_quiet)])
        ours_line = next(line for line in table.splitlines() if "wgmma" in line)
        assert "1.0000 ~" in ours_line and "2.00x ~" in ours_line and noted(table)
        table = fmt([row(quiet, torch_noisy)])  # torch's time spread: our ratio to it is marked, our time not
        ours_line = next(line for line in table.splitlines() if "wgmma" in line)
        assert "1.0000 ~" not in ours_line and "2.00x ~" in ours_line and noted(table)


def test_the_bench_modules_stay_small():
    """The benchmark is split by concern (cases, running, report, plot, results): each module
    under 300 lines."""
    folder = ROOT / "cupy_ops" / "bench"
    sizes = {p.name: p.read_text().count("\n") for p in folder.glob("*.py")}
    assert {"cases.py", "running.py", "report.py", "plot.py", "results.py"} <= set(sizes)
    assert max(sizes.values()) < 300, sizes
