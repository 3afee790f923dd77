"""Execute a Jupyter notebook top to bottom in a fresh Python process and write it back with
its outputs (nbformat 4): stdout/stderr streams, the value of a cell's last expression, and
every matplotlib figure a cell leaves open (as PNG). A cell that raises stops the run with the
traceback, and the script exits 1.

    python tools/run_notebook.py examples/quickstart.ipynb [--out PATH]

Why not nbclient: it needs a Jupyter kernel (ipykernel, pyzmq, tornado, IPython and a dozen
more), which the GPU machine does not carry. The one IPython syntax the notebook uses is the
shell line, ``!command``, run here as IPython runs it (``{name}`` replaced by that variable's
value; a leading ``python`` is this interpreter), except that a command exiting non-zero
fails its cell. The saved outputs carry no path of the machine that ran them: the working
folder reads ``.``, the home folder ``~`` and the temporary folder ``$TMPDIR``.
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import hashlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import traceback


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _figures() -> list[dict]:
    if "matplotlib.pyplot" not in sys.modules:
        return []
    plt = sys.modules["matplotlib.pyplot"]
    out = []
    for num in plt.get_fignums():
        buf = io.BytesIO()
        plt.figure(num).savefig(buf, format="png", dpi=100, bbox_inches="tight")
        out.append(
            {
                "output_type": "display_data",
                "metadata": {},
                "data": {"image/png": base64.b64encode(buf.getvalue()).decode(), "text/plain": ["<Figure>"]},
            }
        )
    plt.close("all")
    return out


_SHELL = re.compile(r"^(\s*)!(.*)$", re.MULTILINE)


def _shell(command: str, namespace: dict) -> None:
    """A ``!command`` line: its output goes to the cell's streams; a non-zero exit raises."""
    command = re.sub(r"\{(\w+)\}", lambda m: shlex.quote(str(namespace[m.group(1)])), command.strip())
    command = re.sub(r"^python3?(?=\s|$)", shlex.quote(sys.executable), command)
    proc = subprocess.run(command, shell=True, capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, command)


def _python(code: str) -> str:
    """The cell with each ``!command`` line turned into a call of ``_shell``."""
    return _SHELL.sub(lambda m: f"{m.group(1)}__notebook_shell__({m.group(2)!r}, globals())", code)


def _scrub(text: str) -> str:
    """``text`` with this machine's working, home and temporary folders written as ., ~ and $TMPDIR."""
    for folder, name in (
        (os.getcwd(), "."),
        (os.path.expanduser("~"), "~"),
        (tempfile.gettempdir(), "$TMPDIR"),
        ("/tmp", "$TMPDIR"),
    ):
        if folder and folder != "/":
            text = re.sub(re.escape(folder.rstrip("/")) + r"(?=/|\b|$)", lambda _m: name, text)
    return text


def _scrubbed(outputs: list[dict]) -> list[dict]:
    for o in outputs:
        for key in ("text", "traceback"):
            if key in o:
                o[key] = [_scrub(line) for line in o[key]]
        if "evalue" in o:
            o["evalue"] = _scrub(o["evalue"])
        if "text/plain" in o.get("data", {}):
            o["data"]["text/plain"] = [_scrub(line) for line in o["data"]["text/plain"]]
    return outputs


def run_cell(code: str, namespace: dict) -> tuple[list[dict], bool]:
    """Run one cell; return its outputs and whether it succeeded."""
    namespace.setdefault("__notebook_shell__", _shell)
    tree = ast.parse(_python(code))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    stdout, stderr = io.StringIO(), io.StringIO()
    outputs: list[dict] = []
    ok = True
    value = None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            exec(compile(tree, "<cell>", "exec"), namespace)
            if last is not None:
                value = eval(compile(last, "<cell>", "eval"), namespace)
        except Exception:  # noqa: BLE001 -- reported as the cell's error output
            ok = False
            etype, evalue, _ = sys.exc_info()
            tb = traceback.format_exc()
    for name, stream in (("stdout", stdout), ("stderr", stderr)):
        if stream.getvalue():
            outputs.append({"output_type": "stream", "name": name, "text": _lines(stream.getvalue())})
    outputs.extend(_figures())
    if not ok:
        outputs.append(
            {"output_type": "error", "ename": etype.__name__, "evalue": str(evalue), "traceback": tb.splitlines()}
        )
    elif value is not None:
        outputs.append(
            {
                "output_type": "execute_result",
                "metadata": {},
                "execution_count": None,
                "data": {"text/plain": _lines(repr(value))},
            }
        )
    return _scrubbed(outputs), ok


def code_digest(nb: dict) -> str:
    """SHA-256 of the notebook's code cells, in order: what its outputs were made from."""
    code = "\0".join(_source(c) for c in nb["cells"] if c["cell_type"] == "code")
    return hashlib.sha256(code.encode()).hexdigest()


def _gpu_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    except ImportError:
        return "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python tools/run_notebook.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("notebook")
    p.add_argument("--out", help="where to write the executed notebook (default: in place)")
    args = p.parse_args(argv)
    try:
        import matplotlib

        matplotlib.use("Agg")  # figures are drawn off-screen and stored in the notebook
    except ImportError:
        pass
    with open(args.notebook) as f:
        nb = json.load(f)
    namespace: dict = {"__name__": "__main__"}
    count, ok = 0, True
    t0 = time.perf_counter()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        if not ok:
            cell["outputs"], cell["execution_count"] = [], None
            continue
        count += 1
        outputs, ok = run_cell(_source(cell), namespace)
        for o in outputs:
            if o["output_type"] == "execute_result":
                o["execution_count"] = count
        cell["outputs"], cell["execution_count"] = outputs, count
        if not ok:
            print(f"cell {count} failed:\n" + "\n".join(outputs[-1]["traceback"]), file=sys.stderr)
    # provenance of the outputs: the code they came from (a CPU test compares it with the
    # notebook's code cells now, so outputs of older code are caught), the GPU and the date
    nb["metadata"]["cupy_ops"] = {
        "code_sha256": code_digest(nb),
        "gpu": _gpu_name(),
        "date": time.strftime("%Y-%m-%d"),
        "clean": ok,
    }
    with open(args.out or args.notebook, "w") as f:
        json.dump(nb, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(
        f"{args.notebook}: {count} code cells run in {time.perf_counter() - t0:.1f} s, "
        f"{'all clean' if ok else 'FAILED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
