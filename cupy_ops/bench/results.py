"""Benchmark result files: JSON lines, one measurement a line (``python -m cupy_ops.bench
--json PATH``; ``--from-json PATH`` reads them back).

Every line is one (problem, dtype, shape, variant) time of one run and carries where it was
measured (commit, date, GPU, driver, torch, CuPy, NVRTC, ...), so a line quoted alone still
says so. ``ratio`` is torch eager's median over this one's, timed in the same run (above 1:
faster than torch); ``spread`` marks a time whose 80th percentile exceeds ``report.SPREAD_FLAG``
x its 20th, ``ratio_spread`` a ratio built on such a time (the tables' ``~``). The copy
baseline of a bandwidth-bound case is the variant ``"d2d copy"``; the host overhead per eager
call, the problem ``"host_overhead"``; the first calls of fresh processes
(``python -m cupy_ops.bench.first_call --results``), the problem ``"first_call"`` (the op as its
shape, the cache state as its variant), KernelBench's own evaluator (``"kernelbench_eval"``,
the problem as its shape) and examples/kernelbench_level2.py (``"kernelbench_level2"``, the
problem and its sizes as the shape); the table readers skip them. The older single-JSON files
(``{"environment", "rows"}``) are read too.
"""

from __future__ import annotations

import json

from .cases import Row, Variant
from .report import spread
from .timing import Stats

# The environment fields of every line, in this order.
ENV_KEYS = (
    "commit",
    "date",
    "gpu",
    "driver",
    "torch",
    "cupy",
    "nvrtc",
    "cuda",
    "capability",
    "sm_count",
    "cupy_ops",
    "python",
)
COPY = "d2d copy"
HOST = "host_overhead"
HOST_NUMEL = 4096  # the input of the host-overhead figures (bench.host's default)
FIRST_CALL = "first_call"
KERNELBENCH = "kernelbench_eval"  # KernelBench's own eval_kernel_against_ref (docs/benchmarks.md)
LEVEL2 = "kernelbench_level2"  # examples/kernelbench_level2.py --results: the problem as its shape
PREPACKED = "prepacked"  # python -m cupy_ops.bench.prepacked --results: plain and prepacked weights
# problems of their own tables: the speedup tables skip them
OWN_TABLES = (FIRST_CALL, KERNELBENCH, LEVEL2, PREPACKED)


class ResultFileError(ValueError):
    """A file that is not a benchmark result file (neither JSON lines nor the older JSON)."""


def record(env: dict, problem: str, dtype: str, shape: str, variant: str, ms: float | None, **fields) -> dict:
    """One line of a results file: ``env``'s fields (``ENV_KEYS``), the measurement's key and
    time, every other field None unless given."""
    rec = {
        **{k: env.get(k) for k in ENV_KEYS},
        "problem": problem,
        "dtype": dtype,
        "shape": shape,
        "variant": variant,
        "ms": ms,
    }
    for key in (
        "p20",
        "p80",
        "runs",
        "ratio",
        "bytes",
        "flops",
        "max_abs_error",
        "bitwise_equal",
        "error",
        "scaled_from",
        "runs_max",
        "max_seconds",
    ):
        rec[key] = fields.pop(key, None)
    rec.update(spread=fields.pop("spread", False), ratio_spread=fields.pop("ratio_spread", False), **fields)
    return rec


def to_records(
    rows: list[Row], env: dict, host: dict | None = None, *, runs: int | None = None, max_seconds: float | None = None
) -> list[dict]:
    """One dict per measurement of ``rows`` (and of ``host``: ``{expression: us}``), each with
    ``env``'s fields (``ENV_KEYS``). ``runs`` / ``max_seconds``: the run's budget per variant."""
    out = []
    for r in rows:
        eager = r.get("torch eager")
        es = eager.stats if eager else None
        measured = [(v.name, v.stats, v) for v in r.variants] + ([(COPY, r.copy, None)] if r.copy else [])
        for name, s, v in measured:
            out.append(
                record(
                    env,
                    r.problem,
                    r.dtype,
                    r.shape,
                    name,
                    s.median if s else None,
                    p20=s.p20 if s else None,
                    p80=s.p80 if s else None,
                    runs=s.runs if s else None,
                    ratio=es.median / s.median if s and es and s.median else None,
                    spread=spread(s),
                    ratio_spread=bool(s and es and (spread(s) or spread(es))),
                    bytes=r.bytes,
                    flops=r.flops,
                    max_abs_error=v.max_abs_error if v else None,
                    bitwise_equal=v.bitwise_equal if v else None,
                    error=v.error if v else None,
                    scaled_from=r.scaled_from,
                    runs_max=runs,
                    max_seconds=max_seconds,
                )
            )
    for name, us in (host or {}).items():
        out.append(record(env, HOST, "float32", str(HOST_NUMEL), name, us / 1e3))
    return out


def append(path, records: list[dict]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")


def write(path, records: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")


def from_records(records: list[dict]) -> tuple[list[Row], dict, dict]:
    """``(rows, environment, host overhead {expression: us})`` of a file's lines. A later line
    of the same (problem, dtype, shape, variant) replaces an earlier one, so a re-run of a few
    cases can be appended; the environment is the last line's, with ``runs``: the (commit, date) of
    the table lines kept (not replaced), in order."""
    rows: dict[tuple, Row] = {}
    host: dict[str, float] = {}
    env: dict = {}
    kept: dict[tuple, tuple] = {}  # (problem, dtype, shape, variant) -> (commit, date) of its line
    for rec in records:
        if not isinstance(rec, dict):
            raise ResultFileError(f"a line holds {type(rec).__name__}, not an object")
        try:
            env = {k: rec.get(k) for k in ENV_KEYS}
            if rec["problem"] not in OWN_TABLES and rec["problem"] != HOST:
                key = (rec["problem"], rec["dtype"], rec["shape"], rec["variant"])
                kept.pop(key, None)  # re-inserted: the dict's order is the order of the lines kept
                kept[key] = (rec.get("commit"), rec.get("date"))
            if rec["problem"] == HOST:
                host[rec["variant"]] = rec["ms"] * 1e3
                continue
            if rec["problem"] in OWN_TABLES:
                continue
            key = (rec["problem"], rec["dtype"], rec["shape"])
            if key not in rows:
                rows[key] = Row(*key, rec["bytes"], rec["flops"], rec.get("scaled_from"))
            row = rows[key]
            stats = Stats(rec["ms"], rec["p20"], rec["p80"], rec["runs"]) if rec["ms"] is not None else None
        except KeyError as exc:
            raise ResultFileError(f"a line has no {exc} field") from None
        if rec["variant"] == COPY:
            row.copy = stats
            continue
        variant = Variant(rec["variant"], stats, rec.get("max_abs_error"), rec.get("bitwise_equal"), rec.get("error"))
        names = [v.name for v in row.variants]
        if variant.name in names:
            row.variants[names.index(variant.name)] = variant
        else:
            row.variants.append(variant)
    return list(rows.values()), {**env, "runs": list(dict.fromkeys(kept.values()))}, host


def _from_old_json(data: dict) -> tuple[list[Row], dict, dict]:
    rows = []
    for r in data["rows"]:
        variants = [Variant(**{**v, "stats": Stats(**v["stats"]) if v.get("stats") else None}) for v in r["variants"]]
        rows.append(Row(**{**r, "variants": variants, "copy": Stats(**r["copy"]) if r.get("copy") else None}))
    return rows, dict(data.get("environment") or {}), dict(data.get("host_overhead_us") or {})


def read(path) -> tuple[list[Row], dict, dict]:
    """``(rows, environment, host overhead)`` of a result file. Raises ``OSError`` when it
    cannot be read and ``ResultFileError`` when it is not a result file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    try:
        if isinstance(whole, dict) and "rows" in whole:
            return _from_old_json(whole)
        records = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ResultFileError(f"line {i} is not JSON ({exc.msg})") from None
        if not records:
            raise ResultFileError("it holds no measurement")
        return from_records(records)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ResultFileError):
            raise
        raise ResultFileError(f"{type(exc).__name__}: {exc}") from None
