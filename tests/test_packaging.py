"""Packaging: the wheel carries cuda_src and finds it installed outside the repository;
importing cupy_ops compiles nothing (and does not even import CuPy)."""

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p.name for p in (ROOT / "cuda_src").iterdir() if p.suffix in (".cu", ".cuh"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    # --no-build-isolation: the test must also run where no package index is reachable
    # (the GPU machine); setuptools and wheel are then taken from the environment.
    pytest.importorskip("setuptools", reason="setuptools is needed to build the wheel")
    pytest.importorskip("wheel", reason="the wheel package is needed to build the wheel")
    # built from a copy: setuptools builds in the tree (build/, *.egg-info), and under
    # pytest-xdist two workers build this fixture at once (an empty wheel came of it)
    src = tmp_path_factory.mktemp("tree") / "cupy_ops"
    shutil.copytree(
        ROOT,
        src,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*cache", ".whl"),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [whl] = out.glob("cupy_ops-*.whl")
    return whl


def test_wheel_contains_the_kernel_sources(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for src in SOURCES:
        assert f"cupy_ops/_cuda_src/{src}" in names


def test_installed_wheel_finds_its_sources_outside_the_repo(wheel, tmp_path):
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:  # a wheel is installed by unpacking it into site-packages
        z.extractall(target)
    code = "import cupy_ops.compiler as c; d = c.source_dir(); print(d); print(len(c.assemble('relu.cu')))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    where = proc.stdout.splitlines()[0]
    assert where == str(target / "cupy_ops" / "_cuda_src")
    assert int(proc.stdout.splitlines()[1]) > 1000


def test_import_compiles_nothing(tmp_path):
    code = (
        "import sys, cupy_ops, cupy_ops.models.relu, cupy_ops.models.linear_relu_div, "
        "cupy_ops.models.matmul\n"
        "from cupy_ops import launch\n"
        "from cupy_ops.compiler import build\n"
        "assert 'cupy' not in sys.modules, 'import cupy_ops imported CuPy'\n"
        "assert not launch.handles and not build._binaries\n"
        "print('ok')"
    )
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_wheel_carries_license_and_py_typed(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "cupy_ops/py.typed" in names
    assert any(n.endswith("LICENSE") for n in names), names


def test_wheel_long_description_has_no_relative_link(wheel):
    """A package index shows the long description away from the repository: a relative link
    (README's docs/ pages, its plot) would lead nowhere there."""
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    description = metadata.split("\n\n", 1)[1]
    assert "cupy_ops" in description and "NVRTC" in description
    assert "](docs/" not in description
    links = re.findall(r"\]\(([^)]*)\)", description) + re.findall(r"""src=["']([^"']*)""", description)
    assert all(re.match(r"https?://", link) for link in links), links


def test_the_package_parses_as_python_3_9_and_defers_new_annotations():
    """setup.cfg and README say Python >= 3.9: every module parses with 3.9's grammar, and any
    module whose annotations use ``X | Y`` (3.10 at run time) defers them (``from __future__
    import annotations``), except in the functions declared as ops, whose annotations the op
    layer reads for the schema: there ``Optional[...]`` only."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "cupy_ops"
    wrong = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 9))
        future = any(
            isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
            for n in tree.body
        )
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            annotations = [a.annotation for a in fn.args.args + fn.args.kwonlyargs if a.annotation] + (
                [fn.returns] if fn.returns else []
            )
            union = any(
                isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr) for a in annotations for n in ast.walk(a)
            )
            declared = any(isinstance(d, ast.Call) and getattr(d.func, "id", None) == "op" for d in fn.decorator_list)
            if union and (declared or not future):
                wrong.append(f"{path.relative_to(root.parent)}:{fn.lineno} {fn.name}")
    assert not wrong, "annotations Python 3.9 cannot evaluate:\n" + "\n".join(wrong)


# setup.cfg's layout is one setuptools calls simple (the root the one package_dir, cuda_src/ reached
# through the link cupy_ops/_cuda_src): an editable install is a path entry, and a regular package
# on the path wins over a folder named cupy_ops (a clone's root, seen from its parent), which a
# finder placed after the path-based import would not.
def test_import_from_the_folder_holding_a_clone_named_cupy_ops(tmp_path):
    """``import cupy_ops`` run from the parent of a folder named ``cupy_ops`` (a clone's root: no
    ``__init__.py``) gets the installed package, not that folder as an empty namespace package."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = [sys.executable, "-c", "import cupy_ops; print(cupy_ops.__file__); print(cupy_ops.relu.__name__)"]
    if subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, timeout=120).returncode != 0:
        pytest.skip("cupy_ops is not installed here (only put on PYTHONPATH), so nothing can hide it")
    (tmp_path / "cupy_ops").mkdir()
    (tmp_path / "cupy_ops" / "README.md").write_text("a clone\n")
    proc = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.strip().splitlines()[-1:]
    where, name = proc.stdout.split()
    assert Path(where).parent.name == "cupy_ops" and tmp_path not in Path(where).parents and name == "relu"
