"""README's instructions, as a new user follows them (CPU): the install block (a virtual
environment, one torch line, the test command CI runs verbatim, no placeholder URL, no clone
folder named like the package), the commands shown for a machine without a GPU, the examples
said to need one, and the benchmark table generated from its results file."""

import re
from pathlib import Path

import pytest

from cupy_ops.bench import report, results

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TEST_COMMAND = 'pip install -e ".[cuda13,test]" && pytest'
README_TABLE = re.compile(r"^<!-- bench-table:begin -->\n(.*?)^<!-- bench-table:end -->$", re.MULTILINE | re.DOTALL)


def section(title: str) -> str:
    """README's section under the heading ``## title``, up to the next one."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.MULTILINE | re.DOTALL)
    assert m, f"README has no '## {title}' section"
    return m.group(1)


def shell_blocks(text: str) -> list[list[str]]:
    """The command lines of each ```bash block of ``text`` (comments dropped)."""
    blocks = re.findall(r"^```bash\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    return [[line.split("  #")[0].strip() for line in b.splitlines() if line.strip()] for b in blocks]


def test_the_install_block_is_one_path_to_paste():
    """One block: a virtual environment, ONE torch line (the alternative for a machine without a
    GPU in prose), then the test command .ci/run runs verbatim."""
    [block] = shell_blocks(section("Install"))
    assert block[0] == "python -m venv .venv && . .venv/bin/activate"
    torch_lines = [line for line in block if line.startswith("pip install torch")]
    assert torch_lines == ["pip install torch"]
    assert block[-1] == TEST_COMMAND
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_cpu_torch_for_a_machine_without_a_gpu_is_given_in_prose():
    text = section("Install")
    prose = re.sub(r"^```bash\n.*?^```$", "", text, flags=re.MULTILINE | re.DOTALL)
    assert "`pip install torch --index-url https://download.pytorch.org/whl/cpu`" in prose
    assert re.search(r"[Ww]ithout a GPU, install torch's CPU build", prose)


def test_no_placeholder_url_and_installed_from_a_checkout():
    """No public URL exists yet: README names none (no `<url>`) and installs from a checkout;
    no step makes a folder named cupy_ops (the package imports from its parent folder all the
    same: test_packaging)."""
    assert "<url>" not in README and "git clone" not in README
    assert not re.search(r"\bcd cupy_ops\b", README)
    install = " ".join(section("Install").split())
    assert "From a checkout of this repository:" in install


def test_the_commands_for_a_machine_without_a_gpu_need_none():
    """Each ``python -m cupy_ops`` command of "Checking kernels without a GPU" works without
    one: ``warm`` is shown with the ``--capability`` it needs there."""
    text = section("Checking kernels without a GPU")
    commands = re.findall(r"`(python -m cupy_ops [^`]*)`", text)
    assert {c.split()[3] for c in commands} == {"compile", "warm"}, commands
    for c in commands:
        if c.split()[3] == "warm":
            assert re.search(r"--capability \d+\.\d", c), c


def test_the_examples_are_said_to_need_a_gpu():
    """README names a KernelBench example with the words that it needs a GPU (without one it
    exits with a line saying so)."""
    for m in re.finditer(r"python examples/(\w+)\.py", README):
        before = README[max(0, m.start() - 200) : m.start()]
        assert "need a GPU" in before or "needs a GPU" in before, m.group(0)


def test_readme_bench_table_is_generated_from_the_results_file():
    m = README_TABLE.search(README)
    if not m:
        pytest.skip(
            "README.md has no <!-- bench-table:begin --> / <!-- bench-table:end --> lines around its "
            "matrix-ops table yet"
        )
    rows, env, _ = results.read(ROOT / "benchmarks" / "results" / "h100.jsonl")
    assert m.group(1).strip() == report.format_markdown(rows, env).strip(), (
        "README's bench table is not the one of benchmarks/results/h100.jsonl: put the output of "
        "python -m cupy_ops.bench --from-json benchmarks/results/h100.jsonl --markdown OUT.md between the lines"
    )
