"""What pytest prints over this suite (CPU): one line for the tests skipped for want of a GPU
(tests/conftest.py), and no warning that torch raises inside itself (setup.cfg's
filterwarnings), while a warning of ours is still shown."""

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import GPU_REASON

ROOT = Path(__file__).resolve().parents[1]


def pytest_in(folder: Path, *args):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_without_a_gpu_the_gpu_skips_are_one_summary_line(tmp_path):
    if GPU_REASON is None:
        pytest.skip("a GPU is present: no test is skipped for want of one")
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -rs\nmarkers =\n    gpu: needs a GPU\n")
    (tmp_path / "test_some.py").write_text(
        textwrap.dedent("""
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
    """)
    )
    proc = pytest_in(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert out.count(GPU_REASON) == 1 and f"4 GPU tests skipped: {GPU_REASON}" in out.splitlines(), out
    assert re.search(r"^SKIPPED \[1\] test_some.py:\d+: not this one$", out, re.MULTILINE), out
    assert "1 passed, 5 skipped" in out.splitlines()[-1]


def test_torchs_own_deprecation_warnings_are_not_shown_ours_are(tmp_path):
    """Forward AD's first ``make_dual`` loads torch's jvp decompositions, which call the
    deprecated ``torch.jit.script`` (18 warnings over test_op.py): setup.cfg's [tool:pytest]
    silences that one; a DeprecationWarning raised elsewhere still shows."""
    (tmp_path / "test_warns.py").write_text(
        textwrap.dedent("""
        import warnings

        import torch
        import torch.autograd.forward_ad as fwAD

        def test_forward_ad():
            with fwAD.dual_level():
                fwAD.make_dual(torch.ones(2), torch.ones(2))

        def test_ours():
            warnings.warn("an API of ours is deprecated", DeprecationWarning)
    """)
    )
    proc = pytest_in(tmp_path, "-c", str(ROOT / "setup.cfg"), "--rootdir", str(tmp_path), "test_warns.py")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "an API of ours is deprecated" in out and "torch.jit.script" not in out, out
    assert re.search(r"2 passed, 1 warning\b", out.splitlines()[-1]), out
