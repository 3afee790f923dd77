"""What the compile layer reads from a cubin (an ELF file): its sections by name and the
``.nv.info`` attribute records ptxas writes (registers, stack frame, kernel parameters)."""
from __future__ import annotations

import struct


def sections(cubin: bytes) -> dict[str, tuple]:
    """``{section name: ELF64 section header}`` (offset at [4], size at [5]); {} for no ELF."""
    if cubin[:4] != b"\x7fELF":
        return {}
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    return {cstr(cubin, names + h[0]): h for h in headers}


def cstr(cubin: bytes, offset: int) -> str:
    return cubin[offset:cubin.index(b"\0", offset)].decode()


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
