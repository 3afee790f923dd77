"""The repository holds the product (CPU): no experiment archive in the tree, the front door
and docs kept short, and the docs' anchors named in the code resolve."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SKIP_DIRS = {
    ".git",
    ".venv",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".ruff_cache",
    "gpu-logs",
}


def tracked_files() -> list[Path]:
    """The files git tracks (a clean clone: what CI sees); without git, every file of the tree
    outside build and cache folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
        files = [ROOT / p for p in out.decode().split("\0") if p]
        if files:
            return [f for f in files if f.exists()]
    except (OSError, subprocess.SubprocessError):
        pass
    return [
        p
        for p in ROOT.rglob("*")
        if p.is_file() and not _SKIP_DIRS & set(p.relative_to(ROOT).parts) and not p.name.endswith(".egg-info")
    ]


FILES = tracked_files()


def test_benchmarks_hold_scripts_and_results_not_an_archive():
    bench = [f for f in FILES if f.relative_to(ROOT).parts[0] == "benchmarks"]
    assert len(bench) <= 15, sorted(f.name for f in bench)
    assert not [f for f in FILES if f.suffix in (".diff", ".patch")]
    assert len([f for f in FILES if f.suffix == ".png"]) <= 3
    logs = [f.name for f in bench if f.suffix in (".log", ".txt")]
    assert not logs, logs


@pytest.mark.parametrize(
    "path, limit", [("README.md", 200)] + [(f"docs/{p.name}", 400) for p in sorted((ROOT / "docs").glob("*.md"))]
)
def test_the_front_door_and_the_docs_stay_short(path, limit):
    lines = (ROOT / path).read_text(encoding="utf-8").count("\n")
    assert lines <= limit, f"{path} has {lines} lines (at most {limit})"


def test_docs_links_from_the_code_resolve():
    """Every ``docs/<file>.md#anchor`` named in the code names a file and a heading (or an
    explicit anchor) that exist."""
    anchors = {}
    for doc in (ROOT / "docs").glob("*.md"):
        text = doc.read_text(encoding="utf-8")
        names = set(re.findall(r'<a id="([^"]+)"', text))
        for heading in re.findall(r"^#+\s+(.*)$", text, re.M):
            slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            names.add(slug)
        anchors[doc.name] = names
    missing = []
    for f in FILES:
        if f.suffix not in (".py", ".cu", ".cuh", ".sh"):
            continue
        for doc, anchor in re.findall(r"docs/(\w+\.md)#([\w\-]+)", f.read_text(encoding="utf-8")):
            if anchor not in anchors.get(doc, ()):
                missing.append(f"{f.relative_to(ROOT)}: docs/{doc}#{anchor}")
    assert not missing, missing
