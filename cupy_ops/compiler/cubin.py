"""What the compile layer reads from a compiled image: a cubin's (an ELF file) sections by
name and the ``.nv.info`` attribute records ptxas writes (registers, stack frame, static shared
memory, kernel parameters), and a PTX entry's parameter list. All reading of cubins is here."""

from __future__ import annotations

import re
import struct

# .nv.info attribute records (EIATTR_*) read here
EIATTR_FRAME_SIZE = 0x11
EIATTR_KPARAM_INFO = 0x17
EIATTR_REGCOUNT = 0x2F


def sections(cubin: bytes) -> dict[str, tuple]:
    """``{section name: ELF64 section header}`` (offset at [4], size at [5]); {} for no ELF."""
    if cubin[:4] != b"\x7fELF":
        return {}
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    return {cstr(cubin, names + h[0]): h for h in headers}


def cstr(cubin: bytes, offset: int) -> str:
    return cubin[offset : cubin.index(b"\0", offset)].decode()


def nv_info(cubin: bytes, header) -> list[tuple[int, int]]:
    """``[(attribute, payload offset)]`` of the EIFMT_SVAL records (the ones with a payload)
    in the ``.nv.info`` section ``header``."""
    out = []
    pos, end = header[4], header[4] + header[5]
    while pos + 4 <= end:
        fmt, attr, size = struct.unpack_from("<BBH", cubin, pos)
        if fmt != 0x04:
            pos += 4
            continue
        out.append((attr, pos + 4))
        pos += 4 + size
    return out


def param_sizes(image: bytes, lowered: str) -> list[int] | None:
    """The sizes in bytes of kernel ``lowered``'s parameters, in order, as NVRTC laid them
    out in ``image``: a cubin's ``EIATTR_KPARAM_INFO`` records, or a PTX ``.entry``'s
    ``.param`` list. None when the image does not hold the kernel."""
    if image[:4] == b"\x7fELF":
        return _cubin_param_sizes(image, lowered)
    return _ptx_param_sizes(image.decode(errors="replace"), lowered)


def _cubin_param_sizes(cubin: bytes, lowered: str) -> list[int] | None:
    header = sections(cubin).get(f".nv.info.{lowered}")
    if header is None:
        return None
    sizes: dict[int, int] = {}
    for attr, at in nv_info(cubin, header):
        if attr == EIATTR_KPARAM_INFO:  # index, ordinal, offset, flags (size << 18)
            _, ordinal, _, flags = struct.unpack_from("<IHHI", cubin, at)
            sizes[ordinal] = flags >> 18
    return [sizes[k] for k in sorted(sizes)]


_PTX_PARAM = re.compile(
    r"\.param\s+(?:\.align\s+\d+\s+)?\.([busf])(\d+)\s+(?:\.ptr\s+(?:\.\w+\s+)*)?"
    r"(?:\.align\s+\d+\s+)?[\w$]+(?:\[(\d+)\])?"
)


def _ptx_param_sizes(ptx: str, lowered: str) -> list[int] | None:
    m = re.search(r"\.entry\s+" + re.escape(lowered) + r"\s*\((.*?)\)", ptx, re.S)
    if m is None:
        m = re.search(r"\.entry\s+" + re.escape(lowered) + r"\s*\n?\s*\{", ptx)
        return [] if m else None
    return [int(bits) // 8 * (int(count) if count else 1) for _, bits, count in _PTX_PARAM.findall(m.group(1))]


# bytes a kernel's .nv.shared section holds beyond its arrays from sm_90 on (the system's
# reserved shared memory; NVRTC 13.0 and 13.5, sm_90 / 90a / 100 / 120 alike), which ptxas's
# report leaves out
_RESERVED_SMEM, _RESERVED_FROM = 1024, 90


def resources(cubin: bytes, target: str) -> dict[str, tuple[int, int, int]]:
    """``{mangled kernel name: (registers, stack frame bytes, static shared bytes)}`` from a
    cubin for ``target`` (``"sm_90a"``): its ``.nv.info`` records (EIATTR_REGCOUNT,
    EIATTR_FRAME_SIZE: (symbol index, value) each) and the size of its
    ``.nv.shared.<name>`` section (none: 0) less the reserved bytes it holds, as ptxas reports
    the kernel's arrays."""
    secs = sections(cubin)
    if ".nv.info" not in secs:
        return {}
    symtab, strtab = secs[".symtab"], secs[".strtab"][4]
    regs: dict[str, int] = {}
    frames: dict[str, int] = {}
    for attr, at in nv_info(cubin, secs[".nv.info"]):
        if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE):
            sym, value = struct.unpack_from("<II", cubin, at)
            (st_name,) = struct.unpack_from("<I", cubin, symtab[4] + sym * 24)
            (regs if attr == EIATTR_REGCOUNT else frames)[cstr(cubin, strtab + st_name)] = value
    reserved = _RESERVED_SMEM if int(re.sub(r"\D", "", target)) >= _RESERVED_FROM else 0
    return {
        k: (v, frames.get(k, -1), secs[f".nv.shared.{k}"][5] - reserved if f".nv.shared.{k}" in secs else 0)
        for k, v in regs.items()
    }


def check_layout(variant_expr: str, layout, sizes: list[int] | None) -> str | None:
    """Why ``layout`` (``[(name, C type, exact bytes or None, at most bytes)]``, what the
    declaration promises) does not match the compiled kernel's parameter ``sizes``, or None."""
    if sizes is None:
        return None

    def show(entries):
        return ", ".join(f"{n or '?'}: {c}" for n, c, _, _ in entries)

    if len(sizes) != len(layout):
        return (
            f"kernel {variant_expr} was read as taking {len(layout)} parameters ({show(layout)}) but NVRTC "
            f"compiled it with {len(sizes)} (of {', '.join(map(str, sizes)) or 'no'} bytes)"
        )
    for k, ((name, ctype, exact, most), size) in enumerate(zip(layout, sizes)):
        if (exact is not None and size != exact) or size > most:
            want = f"{exact}" if exact is not None else f"at most {most}"
            return (
                f"parameter {k} ({name or 'unnamed'}: {ctype}) of kernel {variant_expr} was read as {want} bytes "
                f"but NVRTC compiled it as {size}"
            )
    return None
