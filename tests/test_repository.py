"""The repository speaks of the product (CPU): no words about how the work was organised in
tracked files or their names (provenance is a commit, a date, a GPU and versions), no
experiment archive in the tree, and the front door and docs kept short."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THIS_FILE = Path(__file__).resolve()
# Words about how the work was organised, never about the product. This file spells them out, so
# the word scan skips this file (and only this file).
_WORDS = re.compile(r"\bsessions?\b|\bturn [0-9]+\b|\bruns? [0-9]+\b|\bagents?\b|\bdevice tool\b", re.I)
_NAMES = re.compile(r"session|_run[0-9]", re.I)
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


def scanned_for_words(files: list[Path]) -> list[Path]:
    """The files whose text the word check reads: all but this one, which names the words."""
    return [f for f in files if f.resolve() != THIS_FILE]


def test_no_words_about_how_the_work_was_organised():
    hits = []
    for f in FILES:
        rel = f.relative_to(ROOT).as_posix()
        if _NAMES.search(rel):
            hits.append(f"{rel}: the file's name")
    for f in scanned_for_words(FILES):
        rel = f.relative_to(ROOT).as_posix()
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary (a plot)
        for i, line in enumerate(text.splitlines(), 1):
            m = _WORDS.search(line)
            if m:
                hits.append(f"{rel}:{i}: {m.group(0)!r} in {line.strip()[:100]!r}")
    assert not hits, "write provenance as a commit, a date, a GPU and versions:\n" + "\n".join(hits[:40])


def test_the_word_check_catches_each_word():
    for line in (
        "see session 12",
        "Run 3 - tiles",
        "runs 8-9",
        "the device tool",
        "turn 2",
        "an agent wrote it",
        "Sessions",
    ):
        assert _WORDS.search(line), line
    for line in (
        "returns 0",
        "the kernel runs at 0.98x",
        "turned",
        "run it twice",
        "warpgroups take turns",
        "a reagent",
        "the device's tools",
    ):
        assert not _WORDS.search(line), line
    assert _NAMES.search("bench_h100_session18.json") and _NAMES.search("x_run2.log")
    assert not _NAMES.search("tools/run_notebook.py")


def test_the_word_check_skips_only_this_file():
    skipped = [f.resolve() for f in set(FILES) - set(scanned_for_words(FILES))]
    assert skipped in ([], [THIS_FILE]), skipped
    assert scanned_for_words([THIS_FILE, ROOT / "README.md"]) == [ROOT / "README.md"]
    assert _WORDS.search(THIS_FILE.read_text(encoding="utf-8")), "this file names the words it skips itself for"


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
