"""Compile targets: a source may be fixed to an arch-specific one (sm_90a, sm_100a, sm_120a) or a
family (sm_100f); what runs where; a target this NVRTC lacks, or an instruction that needs the
arch-specific one, is said plainly (CPU: NVRTC needs no GPU)."""

import subprocess
import sys

import pytest

from cupy_ops import KernelCompileError, compiler
from cupy_ops.compiler import targets

WGMMA = 'extern "C" __global__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }\n'


def need_nvrtc():
    return pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")


@pytest.mark.parametrize(
    "arch, cc, runs",
    [
        ("sm_90a", (9, 0), True),
        ("sm_90a", (10, 0), False),
        ("sm_90", (9, 0), True),
        ("sm_80", (8, 6), True),
        ("sm_86", (8, 0), False),
        ("sm_80", (9, 0), False),
        ("sm_100a", (10, 0), True),
        ("sm_100a", (10, 3), False),
        ("sm_100f", (10, 3), True),
        ("sm_103f", (10, 0), False),
        ("sm_120a", (12, 0), True),
        ("sm_120f", (12, 1), True),
        ("compute_80", (9, 0), True),
        ("compute_90", (8, 9), False),
    ],
)
def test_what_runs_where(arch, cc, runs):
    assert targets.runs_on(arch, *cc) is runs
    assert (targets.refusal(arch, *cc) is None) is runs


def test_a_refusal_names_the_target_and_the_device():
    assert targets.refusal("sm_90a", 8, 6, "k.cu") == (
        "k.cu is built for sm_90a, which runs only on compute "
        "capability 9.0; this device is compute capability 8.6 (sm_86)"
    )
    assert "runs on compute capability 10.0 to 10.9" in targets.refusal("sm_100f", 12, 0)


def test_parse_reads_three_digit_capabilities():
    t = targets.parse("sm_100a")
    assert (t.kind, t.major, t.minor, t.suffix, str(t)) == ("sm", 10, 0, "a", "sm_100a")
    assert targets.parse("sm_90x") is None and targets.parse("90") is None


@pytest.mark.parametrize(
    "device, fixed, built",
    [
        ("sm_90", None, "sm_90"),
        ("sm_90", "sm_90a", "sm_90a"),
        ("sm_90a", "sm_90a", "sm_90a"),
        ("sm_80", "sm_90a", None),
        ("sm_86", "sm_80", "sm_80"),
        ("sm_103", "sm_100f", "sm_100f"),
    ],
)
def test_a_source_picks_its_target_for_a_device(device, fixed, built):
    assert compiler.Source("k.cu", "", (), fixed).target(device) == built


def test_a_target_is_checked_when_the_source_is_declared():
    with pytest.raises(ValueError, match=r"arch must look like sm_80, sm_90 or sm_90a .* got 'sm90'"):
        compiler.user(WGMMA, "w.cu", arch="sm90")
    with pytest.raises(ValueError, match="got 'compute_90'"):
        compiler.user(WGMMA, "w.cu", arch="compute_90")
    with pytest.raises(TypeError, match=r"arch must be a target such as 'sm_90' .* got int"):
        compiler.builtin("relu.cu", arch=90)
    src = compiler.user(WGMMA, "w.cu", arch="sm_90a")
    assert src.arch == "sm_90a" and src.refusal(9, 0) is None
    assert "this device is compute capability 8.0 (sm_80)" in src.refusal(8, 0)


def test_wgmma_compiles_for_sm_90a_and_is_refused_for_sm_90_saying_why():
    need_nvrtc()
    fixed = compiler.user(WGMMA, "w.cu", arch="sm_90a")
    fixed.variant("fence")
    for asked in ("sm_90", "sm_90a"):
        [r] = compiler.compile_offline(fixed, asked)
        assert r.ok and r.arch == "sm_90a", r.log
    [r] = compiler.compile_offline(fixed, "sm_80")
    assert r.skipped == "built for sm_90a only"
    plain = compiler.user(WGMMA, "w.cu")
    plain.variant("fence")
    [r] = compiler.compile_offline(plain, "sm_90")
    assert not r.ok and "Instruction 'wgmma.fence' not supported on .target 'sm_90'" in r.log
    assert (
        "cupy_ops: wgmma.fence needs the arch-specific target sm_90a, whose code runs on compute capability "
        '9.0 only: Kernel(..., arch="sm_90a")'
    ) in r.log


@pytest.mark.parametrize("arch", ["sm_100a", "sm_120a", "sm_100f"])
def test_blackwell_targets_where_nvrtc_has_them(arch):
    need_nvrtc()
    if not compiler.nvrtc.supports(arch):
        pytest.skip(f"NVRTC {compiler.nvrtc.version()} has no {arch}")
    src = compiler.user('extern "C" __global__ void k(float* y) { y[0] = 1.f; }\n', "k.cu", arch=arch)
    src.variant("k")
    [r] = compiler.compile_offline(src, arch)
    assert r.ok and r.arch == arch, r.log


def test_a_target_nvrtc_lacks_is_said_plainly(monkeypatch, tmp_path):
    need_nvrtc()
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    src = compiler.user('extern "C" __global__ void k() {}\n', "k.cu", arch="sm_99a")
    v = src.variant("k")
    [r] = compiler.compile_offline(src, "sm_99a")
    version = ".".join(map(str, compiler.nvrtc.version()))
    assert not r.ok and f"cupy_ops: NVRTC {version} cannot build for sm_99a: it knows sm_" in r.log, r.log
    with pytest.raises(KernelCompileError, match="cannot build for sm_99a"):
        compiler.binary(v, "sm_99a")


def test_the_command_line_builds_a_file_for_an_arch_specific_target(tmp_path):
    need_nvrtc()
    path = tmp_path / "fence.cu"
    path.write_text(WGMMA)
    ok = subprocess.run(
        [sys.executable, "-m", "cupy_ops", "compile", "--arch", "sm_90a", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0 and " sm_90a " in ok.stdout, ok.stdout + ok.stderr
    refused = subprocess.run(
        [sys.executable, "-m", "cupy_ops", "compile", "--arch", "sm_90", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 1 and "needs the arch-specific target sm_90a" in refused.stderr, refused.stderr
