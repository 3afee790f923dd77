"""Every registered kernel variant compiles with NVRTC for sm_80 and sm_90 with no GPU, with
the run-time options, and the source assembly the run-time path uses is what gets compiled."""

import subprocess
import sys

import pytest

import cupy_ops.ops  # noqa: F401  (importing the ops declares their kernels)
from cupy_ops import compiler

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")

SOURCES = {s.name: s for s in compiler.sources()}
EXPECTED_SOURCES = {
    "relu.cu",
    "relu_div.cu",
    "relu_backward.cu",
    "row_reduce.cu",
    "gemm.cu",
    "gemm_sm90a.cu",
    "transpose.cu",
}
SM90A_SOURCES = {"gemm_sm90a.cu"}  # wgmma + TMA: Hopper only


def test_every_op_registers_its_kernels():
    assert set(SOURCES) == EXPECTED_SOURCES
    for src in SOURCES.values():
        assert len(src.variants) >= 4, src  # float, f16, bf16, double (or layout variants)
    assert {n for n, s in SOURCES.items() if s.arch} == SM90A_SOURCES


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(EXPECTED_SOURCES))
def test_offline_compile(name, arch):
    src = SOURCES[name]
    results = compiler.compile_offline(src, arch)
    assert [r.expr for r in results] == list(src.variants)
    if name in SM90A_SOURCES and arch == "sm_80":
        assert all(r.skipped == "built for sm_90a only" for r in results)
        return
    for r in results:
        assert r.ok, r.log
        assert r.arch == ("sm_90a" if name in SM90A_SOURCES else arch)
        # ptxas notes when it must serialize wgmma (accumulators not kept in registers): slow
        assert "wgmma.mma_async instructions are serialized" not in r.log and not r.perf, r.log
        assert r.registers is not None and 0 < r.registers <= 255
        assert r.spill_stores == 0 and r.spill_loads == 0, f"{r.expr} spills on {arch}"


def test_offline_compile_reports_errors_with_the_log():
    src = compiler.user("template <class T> __global__ void k(T* p) { p[0] = undeclared; }\n", "broken.cu")
    src.variant("k<float>")
    [r] = compiler.compile_offline(src, "sm_90")
    assert not r.ok
    assert "undeclared" in r.log


def test_a_kernel_without_its_geometry_defines_does_not_compile():
    # the geometry a kernel shares with its launcher comes only from the host: a source
    # compiled without it stops with the #error naming what is missing
    bare = compiler.Source("relu.cu", None, (), None)  # (not registered: the registry stays as the ops left it)
    [r] = compiler.compile_offline(bare, "sm_90", ["relu<float>"])
    assert not r.ok and "EW_VECS_PER_THREAD" in r.log


def test_assemble_inlines_headers_once(tmp_path):
    (tmp_path / "a.cuh").write_text("#pragma once\nint a_marker;\n")
    (tmp_path / "b.cuh").write_text('#pragma once\n#include "a.cuh"\nint b_marker;\n')
    (tmp_path / "k.cu").write_text('#include "a.cuh"\n#include "b.cuh"\nint k_marker;\n')
    src = compiler.assemble("k.cu", tmp_path)
    assert src.count("int a_marker;") == 1 and "int b_marker;" in src and "int k_marker;" in src
    assert "#include" not in src  # nothing left for NVRTC (or the cache key) to miss


def test_editing_a_header_changes_the_compiled_source(tmp_path):
    (tmp_path / "h.cuh").write_text("#define VALUE 1\n")
    (tmp_path / "k.cu").write_text('#include "h.cuh"\n')
    before = compiler.assemble("k.cu", tmp_path)
    (tmp_path / "h.cuh").write_text("#define VALUE 2\n")
    assert compiler.assemble("k.cu", tmp_path) != before


def test_missing_include_names_the_includer(tmp_path):
    # as a C compiler: an error at the include's line, when the preprocessor reaches it
    (tmp_path / "k.cu").write_text('int a;\n#include "nope.cuh"\n')
    text = compiler.assemble("k.cu", tmp_path)
    assert text.splitlines()[1].startswith(
        '#error "cupy_ops: header nope.cuh not found (included from k.cu; looked in '
    )
    src = compiler.user(
        '#if 0\n#include "only_elsewhere.cuh"\n#endif\n__global__ void k(float* y) { y[0] = 1; }\n'
        '#include "nope.cuh"\n',
        "k.cu",
    )
    src.variant("k")
    [r] = compiler.compile_offline(src, "sm_90")
    # NVRTC's own message, at the include's line
    assert not r.ok and 'k.cu(5): catastrophic error: cannot open source file "nope.cuh"' in r.log, r.log
    assert "only_elsewhere" not in r.log  # a branch not taken includes nothing


# --- includes found as a C compiler finds them, errors on the user's own lines --------------


def _project(tmp_path):
    """proj/k.cu includes sub/local.cuh (which includes near.cuh next to it) and outer.cuh of
    an include folder (which includes inner.cuh next to it); a header of the same name in the
    include folder must not win over the one next to its includer."""
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "outer.cuh").write_text(
        '#pragma once\n#include "inner.cuh"\n__device__ float outer_f(float x) { return inner_f(x) + 1.f; }\n'
    )
    (tmp_path / "lib" / "inner.cuh").write_text("#pragma once\n__device__ float inner_f(float x) { return 2.f * x; }\n")
    (tmp_path / "lib" / "near.cuh").write_text("#error the near.cuh next to local.cuh must win\n")
    (tmp_path / "proj" / "sub" / "local.cuh").write_text(
        '#pragma once\n#include "near.cuh"\n__device__ float local_f(float x) { return near_f(x); }\n'
    )
    (tmp_path / "proj" / "sub" / "near.cuh").write_text(
        "#pragma once\n\n__device__ float near_f(float x) { return x + 3.f; }\n"
    )
    path = tmp_path / "proj" / "k.cu"
    path.write_text(
        '#include "sub/local.cuh"\n#include "outer.cuh"\n#include <angled.cuh>\n\n'
        "__global__ void k(float* y) {\n  y[0] = outer_f(local_f(angled_f()));\n}\n"
    )
    (tmp_path / "lib" / "angled.cuh").write_text("__device__ float angled_f() { return 0.f; }\n")
    return path


def test_an_include_in_a_header_is_looked_up_next_to_that_header(tmp_path):
    import cupy_ops

    path = _project(tmp_path)
    k = cupy_ops.Kernel(path, "k", include_dirs=[tmp_path / "lib"])
    [r] = k.compile_offline("sm_90")
    assert r.ok, r.log  # (the near.cuh of the include folder is an #error)


def test_compile_errors_point_at_the_users_file_and_line(tmp_path):
    import cupy_ops

    path = _project(tmp_path)
    body = path.read_text().replace("angled_f()));", "angled_f()));\n  y[1] = not_declared;")
    path.write_text(body)
    near = tmp_path / "proj" / "sub" / "near.cuh"
    near.write_text(near.read_text().replace("x + 3.f", "x + bad_thing"))
    k = cupy_ops.Kernel(path, "k", include_dirs=[tmp_path / "lib"])
    [r] = k.compile_offline("sm_90")
    assert f'{near}(3): error: identifier "bad_thing" is undefined' in r.log, r.log
    assert f'{path}(7): error: identifier "not_declared" is undefined' in r.log, r.log
    # the same for a code string (named after the kernel) and with cupy_ops' common.cuh pasted first
    k = cupy_ops.Kernel(body, "k", include_dirs=[tmp_path / "lib", tmp_path / "proj"])
    [r] = k.compile_offline("sm_90")
    assert '<kernel k>(7): error: identifier "not_declared" is undefined' in r.log, r.log


def test_include_folders_must_exist(tmp_path):
    import cupy_ops

    with pytest.raises(FileNotFoundError, match=r"include folder .*nowhere not found"):
        cupy_ops.Kernel("__global__ void k(float* y) {}", "k", include_dirs=[tmp_path / "nowhere"])


def test_an_include_in_a_comment_is_not_one(tmp_path):
    (tmp_path / "k.cu").write_text('/* an example:\n#include "nope.cuh"\n*/\nint x; // #include "nope.cuh"\n')
    assert "#error" not in compiler.assemble("k.cu", tmp_path)


def test_cli_lists_every_variant_with_registers():
    proc = subprocess.run(
        [sys.executable, "-m", "cupy_ops", "compile", "--arch", "sm_90"], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr
    for src in SOURCES.values():
        for expr in src.variants:
            line = next(ln for ln in proc.stdout.splitlines() if f" {expr} " in ln)
            assert (" sm_90a " if src.arch else " sm_90 ") in line and " ok " in line
    n = sum(len(s.variants) for s in SOURCES.values())
    assert f"{n} of {n} kernel variants compiled" in proc.stdout


def test_cli_rejects_a_bad_arch():
    proc = subprocess.run(
        [sys.executable, "-m", "cupy_ops", "compile", "--arch", "90"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "--arch must look like sm_80" in proc.stderr


def test_ptxas_performance_notes_are_given_to_the_kernel_they_name():
    """ptxas reports a serialized wgmma pipeline as an info line (no warning) naming the
    function, before or after that function's report: each note goes to its kernel's result
    (``perf``, which ``compile`` prints under the kernel's row), none to the others."""
    from cupy_ops.compiler import offline

    log = "\n".join(
        [
            "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized "
            "due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of "
            "the pipeline stage in the function '_Z1av'",
            "ptxas info    : Compiling entry function '_Z1av' for 'sm_90a'",
            "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
            "ptxas info    : Used 168 registers, used 1 barriers",
            "ptxas info    : Compiling entry function '_Z1bv' for 'sm_90a'",
            "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
            "ptxas info    : Used 40 registers",
            "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized "
            "due to insufficient register resources for the wgmma pipeline in the function '_Z1bv'",
        ]
    )
    a, b = offline._parse_ptxas("k.cu", "sm_90a", log, {"_Z1av": "a", "_Z1bv": "b"})
    assert (
        a.ok
        and a.registers == 168
        and a.perf
        == (
            "C7514: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator "
            "registers of  a wgmma between start and end of the pipeline stage",
        )
    )
    assert b.ok and b.registers == 40 and len(b.perf) == 1 and b.perf[0].startswith("C7511: ")


def test_every_compile_of_the_same_code_has_ptxas_report():
    """With a driver present NVRTC returns a cubin it has cached with no log: the offline
    compile asks for none (``--no-cache``), so a second compile of the same code, or of code
    that differs only in a comment (the same PTX), still has ptxas's figures. Without the
    option every compile after the first lacked them (NVRTC 13.0, H200)."""
    code = 'extern "C" __global__ void probe(float* y, float a) { y[threadIdx.x] *= a; }\n'
    results = []
    for text in (code, code, code + "// the same PTX\n"):
        src = compiler.user(text, "cache_probe.cu")
        src.variant("probe")
        results += compiler.compile_offline(src, "sm_90")
    for r in results:
        assert r.ok and "Used" in r.log and "NVRTC gave no ptxas report" not in r.log, r.log
        assert r.registers is not None and r.spill_stores == 0


def test_cubin_fallback_when_nvrtc_gives_no_ptxas_report(monkeypatch):
    # An NVRTC without --no-cache returns a cached cubin with an empty program log: registers
    # and the stack frame (0 bytes proves no spills) then come from the cubin, and must agree.
    from cupy_ops.compiler import offline

    src = SOURCES["relu_div.cu"]
    with_log = compiler.compile_offline(src, "sm_90")
    monkeypatch.setattr(
        offline,
        "_parse_ptxas",
        lambda source, arch, log, lowered: [
            compiler.OfflineResult(source, e, arch, False, log="no ptxas report") for e in lowered.values()
        ],
    )
    from_cubin = compiler.compile_offline(src, "sm_90")
    for a, b in zip(with_log, from_cubin):
        assert b.ok and (b.registers, b.spill_stores, b.stack_bytes) == (a.registers, 0, 0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cubin_fallback_gives_ptxas_shared_bytes(arch, monkeypatch):
    """Static shared memory read from the cubin is ptxas's figure: from sm_90 on the kernel's
    .nv.shared section holds 1 KB of reserved memory more (a 40 KB array read as 41 KB made
    the GPU machine's offline check fail whenever NVRTC 13.0 gave no report)."""
    from cupy_ops.compiler import offline

    code = """extern "C" __global__ void smem(float* y) {
  __shared__ float s[500];
  s[threadIdx.x % 500] = threadIdx.x;
  __syncthreads();
  y[threadIdx.x] = s[499 - threadIdx.x % 500];
}
extern "C" __global__ void none(float* y) { y[threadIdx.x] = 1.f; }"""
    src = compiler.user(code, "smem_fallback.cu")
    with_log = {r.expr: r.shared_bytes for r in compiler.compile_offline(src, arch, ["smem", "none"])}
    monkeypatch.setattr(
        offline,
        "_parse_ptxas",
        lambda source, arch, log, lowered: [
            compiler.OfflineResult(source, e, arch, False, log="no ptxas report") for e in lowered.values()
        ],
    )
    from_cubin = {r.expr: r.shared_bytes for r in compiler.compile_offline(src, arch, ["smem", "none"])}
    assert with_log == from_cubin == {"smem": 2000, "none": 0}


@pytest.mark.parametrize("arch", ["sm_100", "sm_120"])
def test_kernels_compile_for_gpus_newer_than_hopper(arch):
    """README: kernels compile for sm_80 and newer. Every source but the sm_90a-only one, one
    variant of each kernel name (the templates differ by type or layout only), builds for the
    Blackwell architectures; the Hopper source is skipped there (it runs on 9.0 alone). An
    NVRTC older than the architecture (CUDA 12's before 12.8 has no sm_100) cannot say."""
    if int(arch[3:]) not in compiler.nvrtc.binding().getSupportedArchs():
        pytest.skip(f"NVRTC {'.'.join(map(str, compiler.nvrtc.version()))} does not know {arch}")
    for name in sorted(EXPECTED_SOURCES):
        src = SOURCES[name]
        firsts = list({e.split("<")[0]: e for e in reversed(list(src.variants))}.values())
        results = compiler.compile_offline(src, arch, firsts)
        if name in SM90A_SOURCES:
            assert all(r.skipped == "built for sm_90a only" for r in results)
            continue
        for r in results:
            assert r.ok and r.arch == arch, (r.expr, r.log)
