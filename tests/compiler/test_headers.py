"""CUDA's headers for a user's kernel, from the wheels the cuda12 / cuda13 extra installs for
NVRTC's major version (no toolkit, no CUDA_PATH), and cupy_ops' few C headers; without them, an
include of a CUDA header names the extra to install (CPU: NVRTC needs no GPU)."""

import configparser
import fnmatch
from pathlib import Path

import pytest

from cupy_ops import compiler
from cupy_ops.compiler import headers

pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def version():
    return compiler.nvrtc.version()


@pytest.fixture(scope="module")
def installed(version):
    gone = headers.missing(version)
    if gone:
        pytest.skip(f"{', '.join(gone)} not installed ({headers.extra(version[0])})")
    return version


# One program includes every header: each must resolve and compile with the others. <cub/cub.cuh>
# is CCCL's host and device API: under NVRTC, its device headers (<cub/block/...>, <cub/warp/...>).
EVERY_HEADER = r"""
#include <cuda_runtime.h>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <mma.h>
#include <math.h>
#include <stdint.h>
#include <cuda/std/cstdint>
#include <cuda/std/limits>
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <thrust/tuple.h>
namespace cg = cooperative_groups;

extern "C" __global__ void every(float* y, const __grid_constant__ CUtensorMap map) {
  __shared__ cub::WarpReduce<float>::TempStorage warp;
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  auto tile = cg::tiled_partition<32>(block);
  float v = __half2float(__float2half(y[threadIdx.x])) + __bfloat162float(__float2bfloat16(1.0f))
            + float(__nv_fp8_e4m3(2.0f)) + (float)M_PI + (float)cuda::std::numeric_limits<int64_t>::digits;
  v = cg::reduce(tile, v, cg::plus<float>()) + cub::WarpReduce<float>(warp).Sum(v);
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc;
  nvcuda::wmma::fill_fragment(acc, v);
  thrust::tuple<float, cuda::std::int32_t> t(acc.x[0], 1);
  bar.arrive_and_wait();
  y[threadIdx.x] = thrust::get<0>(t) + thrust::get<1>(t) + sizeof(map);
}
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
def test_every_cuda_header_compiles_offline(arch, installed):
    src = compiler.user(EVERY_HEADER, "every.cu")
    src.variant("every")
    [r] = compiler.compile_offline(src, arch)
    assert r.ok and r.arch == arch, r.log


def test_cub_cub_cuh_is_found(installed):
    # CCCL's host and device API does not compile under NVRTC (CCCL 3.2 on says so with an
    # #error; older ones fail in its host parts): found it must be
    r = compiler.nvrtc.compile("#include <cub/cub.cuh>\n", "cub.cu", [], compiler.user("", "cub.cu").options("sm_90"))
    assert 'open source file "cub/cub.cuh"' not in r.log, r.log


def test_the_folders_follow_nvrtcs_major_version_and_are_listed(installed):
    roots = headers.roots(installed)
    whats = [r.what for r in roots]
    assert whats[:2] == ["CUDA runtime headers", "CRT headers"] and whats[-1].startswith("cupy_ops' C headers")
    assert any(w.startswith("CCCL") for w in whats)
    for r in roots[:2]:
        assert r.distribution.startswith("nvidia-cuda-") and r.version.split(".")[0] == str(installed[0])
        assert (r.path / "cuda_runtime.h").is_file() or (r.path / "crt" / "host_defines.h").is_file()
    lines = headers.describe(installed)
    assert len(lines) == len(roots) and all(str(r.path) in line for r, line in zip(roots, lines))
    assert all(f"{r.distribution} {r.version}" in line for r, line in zip(roots, lines) if r.distribution)


def test_a_header_wheel_newer_than_nvrtc_is_noted(installed):
    runtime = headers.roots(installed)[0]
    if runtime.version.startswith(f"{installed[0]}.0."):
        pytest.skip("the runtime headers are of the major version's first minor")
    [older] = [r for r in headers.roots((installed[0], 0)) if r.what == "CUDA runtime headers"]
    assert older.note.endswith(f'pip install "{runtime.distribution}=={installed[0]}.0.*"')
    assert f"({older.note})" in headers.describe((installed[0], 0))[0]


def test_a_wheel_upgrade_changes_the_fingerprint(installed, monkeypatch):
    before = headers.fingerprint(installed)
    real = headers.roots.__wrapped__(installed)
    bumped = tuple(
        r if r.distribution is None else headers.Root(r.path, r.what, r.distribution, r.version + ".1") for r in real
    )
    monkeypatch.setattr(headers, "roots", lambda v: bumped)
    assert headers.fingerprint(installed) != before


def test_without_the_extra_a_cuda_header_names_it(version, monkeypatch):
    # as on a machine without the wheels: only cupy_ops' own C headers
    shims = (headers.Root(headers.SHIMS, "cupy_ops' C headers", None, "x"),)
    monkeypatch.setattr(headers, "roots", lambda v: shims)
    src = compiler.user('#include <cuda_fp16.h>\nextern "C" __global__ void k(__half* y) {}\n', "fp16.cu")
    src.variant("k")
    [r] = compiler.compile_offline(src, "sm_90")
    assert not r.ok and 'cannot open source file "cuda_fp16.h"' in r.log
    assert f'pip install "cupy_ops[cuda{version[0]}]"' in r.log, r.log
    assert "missing: CUDA runtime headers, CRT headers, CCCL" in "\n".join(headers.describe(version))


def test_a_cpp_library_header_points_at_libcudacxx(installed):
    src = compiler.user('#include <cstdint>\nextern "C" __global__ void k() {}\n', "std.cu")
    src.variant("k")
    [r] = compiler.compile_offline(src, "sm_90")
    assert "NVRTC has no C++ standard library <cstdint>; libcu++ has it: #include <cuda/std/cstdint>" in r.log


@pytest.mark.parametrize(
    "header, note",
    [
        ("torch/extension.h", "<torch/extension.h> is torch's, for an extension's host code: cupy_ops.load_inline"),
        ("assert.h", "NVRTC has no C library <assert.h>: assert() is built into NVRTC's device code"),
        ("float.h", "NVRTC has no C library <float.h>: libcu++'s <cuda/std/cfloat>"),
    ],
)
def test_a_host_or_c_header_says_what_stands_for_it(installed, header, note):
    src = compiler.user(f'#include <{header}>\nextern "C" __global__ void k() {{}}\n', "host.cu")
    src.variant("k")
    [r] = compiler.compile_offline(src, "sm_90")
    assert not r.ok and f"cupy_ops: {note}" in r.log, r.log


def test_cupy_ops_c_headers_give_what_c_gives():
    code = (
        "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n"
        'extern "C" __global__ void k(float* y, int64_t* n) {\n'
        "  y[0] = INFINITY; y[1] = -HUGE_VALF; y[2] = (float)M_PI; n[0] = INT64_MAX; n[1] = EXIT_FAILURE;\n"
        "  y[3] = isnan(NAN) ? 1.f : 0.f;\n}\n"
    )
    src = compiler.user(code, "c.cu")
    ptx = compiler.export(src, "sm_80", ["k"], "ptx").image
    for bits in ("2139095040", "-8388608", "1078530011", "9223372036854775807"):  # inf, -inf, pi, INT64_MAX
        assert bits in ptx, bits


def test_the_c_headers_ship_in_the_wheel():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    patterns = [p.strip() for p in cfg["options.package_data"]["cupy_ops.compiler"].split(",")]
    shims = [p.relative_to(headers.SHIMS.parent).as_posix() for p in headers.SHIMS.iterdir()]
    assert shims and all(any(fnmatch.fnmatch(s, p) for p in patterns) for s in shims)


def test_the_extras_install_the_headers_for_their_major():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extras = cfg["options.extras_require"]
    for major in (12, 13):
        wanted = {dist for _, dist, *_ in headers.wheels(major)}
        assert wanted <= {
            line.split(">")[0].split("<")[0].split("=")[0].strip()
            for line in extras[f"cuda{major}"].split("\n")
            if line.strip()
        }, major
