"""docs/claims.md, the list of what README, docs and the public docstrings promise with what backs
each promise, stays true to the tree (CPU): every test it names exists (its file defines a
function of that name), every benchmark row it names is a line of the results file (problem,
dtype, shape and variant, at the commit named), and every claim names the files that make it and
its evidence, or says "none"."""

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLAIMS = ROOT / "docs" / "claims.md"
RESULTS = ROOT / "benchmarks" / "results"
MAX_LINES = 400

# `tests/test_x.py::test_name` (a parametrized test's ids in brackets may follow)
TEST_REF = re.compile(r"^(tests/[\w/]+\.py)::(\w+)(\[[^\]]*\])?$")
# `h100.jsonl@ba22bcd :: problem :: dtype :: shape :: variant`
ROW_REF = re.compile(r"^([\w.-]+\.jsonl)@([0-9a-f]{7,40}) :: (.+?) :: (.+?) :: (.+?) :: (.+)$")
_CELL = re.compile(r"(?<!\\)\|")  # a cell boundary: a pipe not escaped as \|
_CODE = re.compile(r"`([^`]+)`")
_RULE = re.compile(r"^\|[\s|:-]+\|$")  # |---|---|


def table_rows(text: str):
    """``(line number, [cells])`` of every body row of the Markdown tables in ``text``."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("|") or _RULE.match(line):
            continue
        cells = [c.strip() for c in _CELL.split(line)[1:-1]]
        if [c.lower() for c in cells] == ["claim", "where", "evidence"]:
            continue
        rows.append((number, cells))
    return rows


def defined_functions(path: Path) -> set:
    """The functions a test file defines: at module level and in its classes."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        bodies = node.body if isinstance(node, ast.ClassDef) else [node]
        names |= {n.name for n in bodies if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return names


def results_rows(name: str) -> dict:
    """``{(problem, dtype, shape, variant): {commits}}`` of a results file (None if it is absent)."""
    path = RESULTS / name
    if not path.is_file():
        return None
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            rows.setdefault((r["problem"], r["dtype"], r["shape"], r["variant"]), set()).add(r["commit"])
    return rows


def check(text: str, root: Path = ROOT) -> dict:
    """What is wrong with a claims file's ``text``, by kind: each a list of 'line N: ...'."""
    wrong = {"table": [], "where": [], "evidence": [], "tests": [], "rows": []}
    functions, results = {}, {}
    for number, cells in table_rows(text):
        at = f"line {number}"
        if len(cells) != 3 or not cells[0]:
            wrong["table"].append(f"{at}: a claim row has the cells claim | where | evidence, got {len(cells)}")
            continue
        claim, where, evidence = cells
        for token in (t.strip() for t in where.split(",")):
            if not token or not (list(root.glob(token)) if "*" in token else (root / token).is_file()):
                wrong["where"].append(f"{at}: '{token}' is not a file of the repository ({claim[:50]!r})")
        spans = _CODE.findall(evidence)
        refs = [s for s in spans if s.startswith("tests/") or ".jsonl" in s]
        if not refs and "none" not in evidence:
            wrong["evidence"].append(f"{at}: names no test or results row and does not say 'none' ({claim[:50]!r})")
        for ref in refs:
            t, r = TEST_REF.match(ref), ROW_REF.match(ref)
            if t:
                path, name = root / t.group(1), t.group(2)
                if path not in functions:
                    functions[path] = defined_functions(path) if path.is_file() else None
                if functions[path] is None:
                    wrong["tests"].append(f"{at}: {ref}: no file {t.group(1)}")
                elif name not in functions[path]:
                    wrong["tests"].append(f"{at}: {ref}: {t.group(1)} defines no function {name}")
            elif r:
                file, commit, key = r.group(1), r.group(2), r.groups()[2:]
                if file not in results:
                    results[file] = results_rows(file)
                if results[file] is None:
                    wrong["rows"].append(f"{at}: {ref}: no results file benchmarks/results/{file}")
                elif key not in results[file]:
                    wrong["rows"].append(f"{at}: {ref}: no such row (problem, dtype, shape, variant) in {file}")
                elif not any(c.startswith(commit) or commit.startswith(c) for c in results[file][key]):
                    wrong["rows"].append(
                        f"{at}: {ref}: the row is there at {sorted(results[file][key])}, not at {commit}"
                    )
            else:
                wrong["tests" if ref.startswith("tests/") else "rows"].append(
                    f"{at}: `{ref}` is neither `tests/<file>.py::<test>` nor "
                    f"`<card>.jsonl@<commit> :: problem :: dtype :: shape :: variant`"
                )
    return wrong


def _report(problems, what):
    return f"docs/claims.md: {len(problems)} {what}:\n" + "\n".join(problems)


TEXT = CLAIMS.read_text(encoding="utf-8")
PROBLEMS = check(TEXT)


def test_claims_md_is_short_and_each_claim_names_where_and_its_evidence():
    assert TEXT.count("\n") <= MAX_LINES, f"docs/claims.md has {TEXT.count(chr(10))} lines (at most {MAX_LINES})"
    assert len(table_rows(TEXT)) >= 50, "docs/claims.md lists fewer claims than it should (its tables unread?)"
    problems = PROBLEMS["table"] + PROBLEMS["where"] + PROBLEMS["evidence"]
    assert not problems, _report(problems, "rows without their source or evidence")


def test_every_test_named_in_claims_md_exists():
    assert not PROBLEMS["tests"], _report(PROBLEMS["tests"], "tests named that do not exist")


def test_every_results_row_named_in_claims_md_exists():
    assert not PROBLEMS["rows"], _report(PROBLEMS["rows"], "benchmark rows named that are not in the results file")


def test_the_check_finds_each_kind_of_broken_reference():
    rows = results_rows("h100.jsonl")
    problem, dtype, shape, variant = next(iter(rows))
    commit = sorted(rows[(problem, dtype, shape, variant)])[0]
    good = f"`h100.jsonl@{commit} :: {problem} :: {dtype} :: {shape} :: {variant}`"
    text = "\n".join(
        [
            "| claim | where | evidence |",
            "|---|---|---|",
            "| fine | README.md, docs/*.md | `tests/test_claims.py::test_every_test_named_in_claims_md_exists`, "
            + good
            + " |",
            "| fine too, with a \\| in it | README.md | none (H200, no commit recorded) |",
            "| a missing test | README.md | `tests/test_claims.py::test_that_does_not_exist[x]` |",
            "| a missing file | README.md | `tests/test_nowhere.py::test_x` |",
            "| a missing row | README.md | " + good.replace(f":: {variant}`", ":: no such variant`") + " |",
            "| another commit | README.md | " + good.replace(f"@{commit}", "@0000000") + " |",
            "| a missing card | README.md | " + good.replace("h100.jsonl", "h300.jsonl") + " |",
            "| malformed | README.md | `tests/test_claims.py` |",
            "| no evidence | README.md | a benchmark showed it |",
            "| a missing source | docs/nowhere.md | none |",
            "| two cells | README.md |",
        ]
    )
    found = check(text)
    assert [p.split(":")[0] for p in found["tests"]] == ["line 5", "line 6", "line 10"], found["tests"]
    assert [p.split(":")[0] for p in found["rows"]] == ["line 7", "line 8", "line 9"], found["rows"]
    assert [p.split(":")[0] for p in found["evidence"]] == ["line 11"], found["evidence"]
    assert [p.split(":")[0] for p in found["where"]] == ["line 12"], found["where"]
    assert [p.split(":")[0] for p in found["table"]] == ["line 13"], found["table"]


def test_the_variant_count_docs_give_for_warm_is_the_trees():
    """docs/design.md: "151 variants for compute capability 9.0" (what ``python -m cupy_ops
    warm --capability 9.0`` compiles): the number the tree's registry gives now."""
    from cupy_ops import warm

    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    said = re.search(r"(\d+) variants for\s+compute\s+capability 9\.0", text)
    assert said, "docs/design.md no longer gives warm's variant count"
    assert int(said.group(1)) == len(warm.jobs_for([(9, 0)])), said.group(0)


# The claims that have neither a test nor a results row: none. A figure measured once and not
# saved is measured into a results file or removed; a claim added without evidence fails the
# test below.
WITHOUT_EVIDENCE: set = set()


def unevidenced(text: str) -> list:
    """The claims of a claims file whose evidence names no test and no results row."""
    return [
        cells[0]
        for _, cells in table_rows(text)
        if len(cells) == 3 and not any(s.startswith("tests/") or ".jsonl" in s for s in _CODE.findall(cells[2]))
    ]


def test_no_claim_without_evidence_beyond_the_known_ones():
    found = unevidenced(TEXT)
    new = [c for c in found if c not in WITHOUT_EVIDENCE]
    assert not new, "claims with no test and no results row (measure them or remove them):\n" + "\n".join(new)
    gone = WITHOUT_EVIDENCE - set(found)
    assert not gone, "these now have evidence or are gone: drop them from WITHOUT_EVIDENCE:\n" + "\n".join(gone)
    assert unevidenced(
        "| claim | where | evidence |\n|---|---|---|\n| a | README.md | none (measured once) |\n"
        "| b | README.md | `tests/test_claims.py::test_x` |"
    ) == ["a"]
