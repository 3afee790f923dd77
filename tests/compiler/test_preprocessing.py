"""A user's source is compiled as written and NVRTC preprocesses it as a C compiler would: a
header as often as it is included (guards and #pragma once honoured), LF or CRLF lines,
`#  include`, `__has_include`, errors on the exact line of the exact file; every file it
includes is in the cache key, read when the source is declared (CPU: NVRTC needs no GPU)."""

import re
import struct
import uuid

import pytest

from cupy_ops import compiler
from cupy_ops.compiler import build, source

pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    return tmp_path / "cache" / "cupy_ops"


def stored(ptx: str) -> list[float]:
    """The 32-bit constants a kernel's PTX moves into registers, as floats (NVVM writes a
    stored float constant as its bits: ``mov.u32 %r1, 1077936128`` is 3.0f)."""
    bits = [int(m, 16) for m in re.findall(r"mov\.f32\s+%f\d+, 0f([0-9A-F]{8});", ptx)]
    bits += [int(m) & 0xFFFFFFFF for m in re.findall(r"mov\.[ub]32\s+%r\d+, (-?\d+);", ptx)]
    return [struct.unpack("<f", struct.pack("<I", b))[0] for b in bits]


def ptx_of(src, expr="k"):
    return compiler.export(src, "sm_90", [expr], "ptx").image


# X-macro: the same header twice, each time under another definition of its macro
KINDS = "KIND(ONE, 1.0f)\nKIND(TWO, 2.0f)\n"
X_MACRO = """enum Kinds {
#define KIND(name, value) name,
#include "kinds.def"
#undef KIND
};
extern "C" __global__ void k(float* y) {
  y[0] = 0.0f
#define KIND(name, value) + value
#include "kinds.def"
#undef KIND
  ;
}
"""


def test_a_header_included_twice_is_read_twice(tmp_path):
    (tmp_path / "kinds.def").write_text(KINDS)
    path = tmp_path / "k.cu"
    path.write_text(X_MACRO)
    src = compiler.user(X_MACRO, "k.cu", path=path)
    assert stored(ptx_of(src)) == [3.0]  # 3.0f, as a C compiler computes (not 0.0f)
    # the text declarations are read from pastes it twice too
    view = compiler.assemble_user(X_MACRO, "k.cu", path=path)
    assert view.count("KIND(ONE, 1.0f)") == 2


def test_guards_and_pragma_once_keep_a_header_to_one_reading(tmp_path):
    (tmp_path / "guarded.cuh").write_text(
        "// a guard\n#ifndef GUARDED_CUH\n#define GUARDED_CUH\n"
        "__device__ float guarded() { return 1.f; }\n#endif  // GUARDED_CUH\n"
    )
    (tmp_path / "once.cuh").write_text("#pragma once\n__device__ float once() { return 2.f; }\n")
    code = (
        '#include "guarded.cuh"\n#include "once.cuh"\n#include "guarded.cuh"\n#include "once.cuh"\n'
        'extern "C" __global__ void k(float* y) { y[0] = guarded() + once(); }\n'
    )
    src = compiler.user(code, "k.cu", include_dirs=[tmp_path])
    assert stored(ptx_of(src)) == [3.0]
    view = compiler.assemble_user(code, "k.cu", include_dirs=[tmp_path])
    assert view.count("return 1.f") == 1 and view.count("return 2.f") == 1


def test_crlf_lines_and_spaced_directives(tmp_path):
    (tmp_path / "crlf.cuh").write_bytes(b"#pragma once\r\n#define FROM_CRLF 5.0f\r\n")
    code = (
        '#  include   "crlf.cuh"\r\n#\tinclude <crlf.cuh>\r\n'
        'extern "C" __global__ void k(float* y) {\r\n  y[0] = FROM_CRLF;\r\n}\r\n'
    )
    src = compiler.user(code, "k.cu", include_dirs=[tmp_path])
    assert [p for p, _ in src.includes.files] == [str(tmp_path / "crlf.cuh")]
    assert stored(ptx_of(src)) == [5.0]
    view = compiler.assemble_user(code, "k.cu", include_dirs=[tmp_path])
    assert "FROM_CRLF 5.0f" in view and "#error" not in view


def test_has_include_sees_the_include_folders_and_keys_the_cache(tmp_path):
    code = (
        '#if __has_include("extra.cuh")\n#include "extra.cuh"\n#else\n#define EXTRA 1.0f\n#endif\n'
        'extern "C" __global__ void k(float* y) { y[0] = EXTRA; }\n'
    )
    without = compiler.user(code, "k.cu", include_dirs=[tmp_path])
    assert without.includes.system == ("extra.cuh",)
    assert stored(ptx_of(without)) == [1.0]
    (tmp_path / "extra.cuh").write_text("#define EXTRA 2.0f\n")
    with_it = compiler.user(code, "k.cu", include_dirs=[tmp_path])
    assert with_it is not without and with_it.includes.files[0][0] == str(tmp_path / "extra.cuh")
    assert stored(ptx_of(with_it)) == [2.0]


def test_a_quoted_include_is_looked_up_next_to_its_includer_first(tmp_path):
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "lib").mkdir()
    (tmp_path / "proj" / "sub" / "a.cuh").write_text('#include "b.cuh"\n')
    (tmp_path / "proj" / "sub" / "b.cuh").write_text("#define B 1.0f\n")
    (tmp_path / "lib" / "b.cuh").write_text('#error "the b.cuh next to a.cuh must win"\n')
    path = tmp_path / "proj" / "k.cu"
    code = '#include "sub/a.cuh"\nextern "C" __global__ void k(float* y) { y[0] = B; }\n'
    path.write_text(code)
    src = compiler.user(code, "k.cu", path=path, include_dirs=[tmp_path / "lib"])
    assert src.name == str(path)  # NVRTC looks next to the program's file by its name
    assert [p for p, _ in src.includes.files] == [str(tmp_path / "proj" / "sub" / f) for f in ("a.cuh", "b.cuh")]
    assert stored(ptx_of(src)) == [1.0]


def test_errors_name_the_file_and_line_in_every_file(tmp_path):
    (tmp_path / "inner.cuh").write_text("#pragma once\n\n__device__ float inner() { return bad_inner; }\n")
    (tmp_path / "outer.cuh").write_text(
        '#pragma once\n#include "inner.cuh"\n__device__ float outer() { return inner() + bad_outer; }\n'
    )
    path = tmp_path / "k.cu"
    code = '#include "outer.cuh"\n\nextern "C" __global__ void k(float* y) {\n  y[0] = outer() + bad_main;\n}\n'
    path.write_text(code)
    # common.cuh before the code (what Kernel does): the code's lines still count from 1
    src = compiler.user(code, "k.cu", path=path, prelude=("common.cuh",))
    src.variant("k")
    [r] = compiler.compile_offline(src, "sm_90")
    assert f'{tmp_path / "inner.cuh"}(3): error: identifier "bad_inner" is undefined' in r.log, r.log
    assert f'{tmp_path / "outer.cuh"}(3): error: identifier "bad_outer" is undefined' in r.log, r.log
    assert f'{path}(4): error: identifier "bad_main" is undefined' in r.log, r.log
    # and a code string, named after the kernel
    src = compiler.user(code, "<kernel k>", include_dirs=[tmp_path], prelude=("common.cuh",))
    src.variant("k")
    [r] = compiler.compile_offline(src, "sm_90")
    assert '<kernel k>(4): error: identifier "bad_main" is undefined' in r.log, r.log


def test_the_prelude_is_cupy_ops_own_even_with_another_of_its_name_in_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "common.cuh").write_text('#error "not cupy_ops common.cuh"\n')
    monkeypatch.chdir(tmp_path)
    src = compiler.user(
        'extern "C" __global__ void k(f16* y) { y[0].bits = from_acc<f16>(1.0f); }\n',
        "<kernel k>",
        prelude=("common.cuh",),
    )
    assert str(compiler.source_dir() / "common.cuh") in src.text().splitlines()[0]
    src.variant("k")
    assert compiler.compile_offline(src, "sm_90")[0].ok


# --- the cache key covers every file included -----------------------------------------------


def fresh(tmp_path, value: str):
    tag = uuid.uuid4().hex[:8]
    (tmp_path / "value.cuh").write_text(f"#define VALUE {value}\n")
    code = f'#include "value.cuh"\nextern "C" __global__ void k_{tag}(float* y) {{ y[0] = VALUE; }}\n'
    return code, f"k_{tag}"


def test_an_edited_header_compiles_anew_and_an_unchanged_one_is_read_from_disk(tmp_path, cache_dir, monkeypatch):
    code, name = fresh(tmp_path, "1.0f")
    first = compiler.user(code, "k.cu", include_dirs=[tmp_path]).variant(name)
    a = compiler.binary(first, "sm_90")
    (tmp_path / "value.cuh").write_text("#define VALUE 2.0f\n")
    second = compiler.user(code, "k.cu", include_dirs=[tmp_path]).variant(name)
    assert second.source is not first.source
    b = compiler.binary(second, "sm_90")
    assert not b.cached and b.key != a.key and b.image != a.image
    monkeypatch.setattr(build, "_binaries", {})  # as a new process
    again = compiler.user(code, "k.cu", include_dirs=[tmp_path]).variant(name)
    assert compiler.binary(again, "sm_90").cached


def test_a_header_that_now_shadows_another_changes_the_key(tmp_path, cache_dir):
    (tmp_path / "first").mkdir()
    code, name = fresh(tmp_path, "1.0f")
    before = compiler.user(code, "k.cu", include_dirs=[tmp_path / "first", tmp_path]).variant(name)
    k1 = compiler.binary(before, "sm_90").key
    (tmp_path / "first" / "value.cuh").write_text("#define VALUE 3.0f\n")
    after = compiler.user(code, "k.cu", include_dirs=[tmp_path / "first", tmp_path]).variant(name)
    assert compiler.binary(after, "sm_90").key != k1


def test_a_cuda_header_enters_the_key_by_the_file_it_finds(cache_dir):
    src = compiler.user('#include <math.h>\nextern "C" __global__ void k(float* y) { y[0] = M_PI; }\n', "k.cu")
    assert src.includes.system == ("math.h",)
    print_ = src.fingerprint()
    assert "<math.h>" in print_ and str(compiler.headers.SHIMS / "math.h") in print_


def test_an_include_of_a_macro_is_never_read_from_disk(tmp_path, cache_dir, monkeypatch):
    (tmp_path / "value.cuh").write_text("#define VALUE 1.0f\n")
    code = '#define HEADER "value.cuh"\n#include HEADER\nextern "C" __global__ void k(float* y) { y[0] = VALUE; }\n'
    src = compiler.user(code, "k.cu", include_dirs=[tmp_path])
    assert src.includes.computed == ("HEADER",) and not src.tracked
    compiler.binary(src.variant("k"), "sm_90")
    assert not cache_dir.exists() or not list(cache_dir.glob("*.bin"))  # what it includes is not known


def test_a_header_edited_during_the_compile_leaves_nothing_on_disk(tmp_path, cache_dir, monkeypatch):
    code, name = fresh(tmp_path, "1.0f")
    src = compiler.user(code, "k.cu", include_dirs=[tmp_path])
    real = compiler.nvrtc.compile

    def edit_then_compile(*args):
        (tmp_path / "value.cuh").write_text("#define VALUE 9.0f\n")
        return real(*args)

    monkeypatch.setattr(compiler.nvrtc, "compile", edit_then_compile)
    compiler.binary(src.variant(name), "sm_90")
    assert not list(cache_dir.glob("*.bin"))


def test_the_scan_ignores_comments_and_finds_every_operand(tmp_path):
    (tmp_path / "a.cuh").write_text("#include <b.cuh>\n")
    (tmp_path / "b.cuh").write_text("")
    text = (
        '/* #include "no1.cuh" */\n// #include "no2.cuh"\n#include "a.cuh" // why\n'
        "#if __has_include(<maybe.cuh>)\n#endif\n#include NAME\n"
    )
    found = source.scan(text, tmp_path, [tmp_path])
    assert [p for p, _ in found.files] == [str(tmp_path / "a.cuh"), str(tmp_path / "b.cuh")]
    assert found.system == ("maybe.cuh",) and found.computed == ("NAME",)
