"""The example scripts: a clear one-sentence exit without a GPU, a correct table with one."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    "linear_relu_div.py": ["--batch-size", "64", "--in-features", "256", "--out-features", "128", "--runs", "5"],
    "relu.py": ["--batch-size", "64", "--dim", "4097", "--runs", "5"],
    "matmul.py": ["--n", "129", "--runs", "5"],
}
OTHER = ["kernelbench_level2.py", "my_kernel.py", "port_load_inline.py"]


def run(script, *args, env=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.mark.parametrize("script", sorted(SMALL) + OTHER)
def test_without_gpu_one_clear_sentence(script):
    # hide any GPU, so the no-GPU path is shown on GPU machines too
    proc = run(script, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [s for s in proc.stderr.splitlines() if s.strip()]
    assert len(lines) == 1 and "GPU" in lines[0], proc.stderr
    # and what works without one: NVRTC compiles on the CPU
    assert "--arch sm_90" in lines[0] and "compile_offline" in lines[0] and " compiles " in lines[0], lines[0]


@pytest.mark.parametrize("script", sorted(SMALL) + OTHER)
def test_every_example_answers_help(script):
    proc = run(script, "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage:") and not proc.stderr.strip(), proc.stderr


def test_user_kernel_example_compiles_without_a_gpu():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
    proc = run("my_kernel.py", "--arch", "sm_90", env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(" sm_90: " in s and " registers, " in s for s in lines[:4]), proc.stdout
    # then autotune's configurations, pruned from ptxas' report with no GPU: the spilling one
    assert lines[4].startswith("autotune's configurations for sm_90") and lines[5].startswith("configuration")
    assert [s.endswith("  kept") for s in lines[6:]] == [True] * 9 + [False], proc.stdout
    assert "pruned: spills registers" in lines[-1]


@pytest.mark.parametrize("script", sorted(SMALL))
def test_help_documents_the_options(script):
    proc = run(script, "--help")
    assert proc.returncode == 0
    for option in ("--dtype", "--trials", "--runs", "--max-seconds"):
        assert option in proc.stdout
    assert "random correctness trials" in proc.stdout and "timed runs per variant" in proc.stdout


def test_the_verdict_names_each_failed_variant_and_sets_the_exit_status(capsys):
    """kernelbench.report: the table (speedups against the first row, torch eager), each
    failure's reason under it, one verdict line, and exit status 1 when any variant failed."""
    from cupy_ops.bench import kernelbench
    from cupy_ops.bench.timing import Stats

    ok = kernelbench.Result("torch eager", Stats(2.0, 1.9, 2.1, 30), 0.0)
    fast = kernelbench.Result("ModelNew", Stats(0.5, 0.5, 0.6, 30), 1e-6)
    assert kernelbench.report([ok, fast]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "results (torch eager = Model):" and "4.00x" in out[4] and "PASS" in out[4]
    assert out[-1] == "all variants correct"
    wrong = kernelbench.Result("ModelNew('naive')", Stats(9.0, 9.0, 9.0, 5), 0.5, False, ["trial 2: max error 0.5"])
    assert kernelbench.report([ok, fast, wrong]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "FAIL" in out[5] and out[-2] == "  ModelNew('naive'): trial 2: max error 0.5"
    assert out[-1] == "INCORRECT: ModelNew('naive')"


@pytest.mark.gpu
def test_kernelbench_level2_checks_every_problem():
    sizes = ["--batch-size", "64", "--in-features", "256", "--out-features", "96"]
    proc = run("kernelbench_level2.py", *sizes, "--no-timing")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [s for s in proc.stdout.splitlines() if s.startswith("| ") and "problem" not in s]
    assert len(rows) == 12 and all(" | pass | " in s for s in rows), proc.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("script", sorted(SMALL))
def test_with_gpu_every_variant_correct(script, dtype):
    proc = run(script, *SMALL[script], "--dtype", dtype)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all variants correct" in proc.stdout and "FAIL" not in proc.stdout


@pytest.mark.gpu
def test_user_kernel_example():
    proc = run("my_kernel.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "matches torch: yes" in proc.stdout


# --- the quickstart notebook -------------------------------------------------------------

NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def test_committed_notebook_ran_clean_on_a_gpu():
    import json

    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] is not None for c in code), "the notebook is committed unexecuted"
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    first = "".join(t for o in code[0]["outputs"] for t in o.get("text", []))
    assert "cuda:0" in first and "compute capability" in first, "the first cell must name the GPU it ran on"
    assert any("image/png" in o.get("data", {}) for c in code for o in c["outputs"]), "no benchmark plot"


def test_notebook_shows_no_machine_path_and_uses_public_commands_only():
    text = NOTEBOOK.read_text()
    assert not re.findall(r"(?<![\w.~$])/(?:root|home|tmp|Users|work|var/folders)/[^\s\"']*", text)
    for internal in ("cupy_ops.__main__", ".suite.", "suite.run", "from cupy_ops.bench import suite"):
        assert internal not in text, internal


def test_notebook_runner_runs_shell_lines_and_keeps_machine_paths_out(tmp_path):
    """tools/run_notebook.py: ``!command`` lines as IPython runs them (``{name}`` expanded,
    ``python`` this interpreter), a failing one fails its cell; the outputs carry no path of
    this machine."""
    import json

    notebook = tmp_path / "nb.ipynb"
    cells = [
        [
            "import os, tempfile",
            "folder = tempfile.mkdtemp()",
            "!python -c \"import sys; print('argv', sys.argv[1:])\" {folder}",
            "print(os.getcwd())",
            "print(os.path.expanduser('~/x'))",
        ],
        ['!python -c "raise SystemExit(3)"'],
    ]
    notebook.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
                "cells": [
                    {
                        "cell_type": "code",
                        "execution_count": None,
                        "metadata": {},
                        "outputs": [],
                        "source": "\n".join(c),
                    }
                    for c in cells
                ],
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "run_notebook.py"), str(notebook)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "FAILED" in proc.stdout, proc.stdout + proc.stderr
    first, second = [c["outputs"] for c in json.loads(notebook.read_text())["cells"]]
    text = "".join(first[0]["text"])
    assert re.fullmatch(r"argv \['\$TMPDIR/[^/']+'\]\n\.\n~/x\n", text), text
    assert second[-1]["output_type"] == "error" and "exit status 3" in second[-1]["evalue"]
    assert str(tmp_path) not in notebook.read_text()


@pytest.mark.gpu
def test_quickstart_notebook_runs_clean(tmp_path):
    out = os.environ.get("CUPY_OPS_NOTEBOOK_OUT") or str(tmp_path / "quickstart.ipynb")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "run_notebook.py"), str(NOTEBOOK), "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0 and "all clean" in proc.stdout, proc.stdout + proc.stderr


def test_the_notebooks_outputs_come_from_its_code():
    """The quickstart's saved outputs were made by its code as it stands (tools/run_notebook.py
    records the code's digest with the GPU and date), and ran clean: an edit to a code cell
    without re-running the notebook on a GPU fails here."""
    spec = importlib.util.spec_from_file_location("run_notebook", ROOT / "tools" / "run_notebook.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    nb = json.loads(NOTEBOOK.read_text())
    made = nb["metadata"].get("cupy_ops")
    assert made, "examples/quickstart.ipynb was not executed by tools/run_notebook.py"
    assert made["code_sha256"] == runner.code_digest(nb), "re-run: python tools/run_notebook.py " + str(NOTEBOOK)
    assert made["clean"] and made["gpu"] not in ("none", "unknown"), made
