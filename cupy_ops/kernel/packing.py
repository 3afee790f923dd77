"""A launch's arguments checked against the kernel's parameters, in one pass: each scalar within
its C type, each pointer a CUDA tensor of the dtypes its type allows, all on one device, the
per-dtype template's type picked by the tensors; the value of each argument slot."""

from __future__ import annotations

import re
from typing import NamedTuple

import torch

from ..dtypes import CUDA_NAMES, SUPPORTED_TEXT
from .arguments import F32_OVERFLOW, foreign, kernel_pointer, kernel_scalar, launch_devices
from .types import POINTEES, RANGES, UNSIGNED_SIZES, base_type, scalar_kind


class Param(NamedTuple):
    """What a launch checks of one parameter: its ``kind`` (``types.KINDS``' values, ``acc`` or
    ``t``: the compute type, or the type parameter, of a per-dtype template), ``name``, C type,
    integer ``limits`` ``(lowest, highest, takes bool)`` or None, the dtypes a pointer may point
    at (None: any), the element size an unsigned pointer needs (None: any), and whether the
    pointer's dtype picks the per-dtype template's type."""

    kind: str
    name: str
    ctype: str
    limits: tuple | None
    pointees: tuple | None
    usize: int | None
    picks: bool


def plan(params, template: str | None) -> list[Param]:
    """The ``Param`` of each of ``params`` (``[(kind, name, C type)]``) of a kernel whose
    per-dtype type parameter is ``template`` (None: none)."""
    t_pattern = re.compile(rf"\b{template}\b") if template else None
    out = []
    for kind, pname, ctype in params:
        base = base_type(ctype)
        pointer = kind == "ptr"
        # None for a stated kind of another C type: kernel_scalar takes the slot's signed range
        limits = RANGES.get(base) if kind in ("i32", "i64") else None
        out.append(
            Param(
                kind,
                pname,
                ctype,
                limits,
                POINTEES.get(base) if pointer else None,
                UNSIGNED_SIZES.get(base) if pointer else None,
                pointer and t_pattern is not None and bool(t_pattern.search(ctype)),
            )
        )
    return out


def pack(kernel: str, plan: list[Param], args, template: str | None) -> tuple[int, torch.dtype | None, list]:
    """``args`` of a launch of ``kernel`` checked against its ``plan``: ``(device, dtype picking
    the per-dtype template or None, the value of each slot)``. Scalars of the template's type
    (``T a``) and of its compute type (``Acc``) are converted once the dtype is known."""
    device, dtype, values, first, later = None, None, [], None, []
    for i, (p, a) in enumerate(zip(plan, args)):
        kind = p.kind
        if kind != "ptr":
            if kind == "acc" or kind == "t":
                later.append(i)
                kind = "f64"  # checked as a number now, against its C type below
            values.append(kernel_scalar(kernel, p.name, p.ctype, kind, a, p.limits))
            continue
        a = kernel_pointer(kernel, p.name, p.ctype, a, foreign)
        if a is None:
            values.append(0)
            continue
        if p.pointees is not None and a.dtype not in p.pointees:
            raise TypeError(
                f"argument {p.name!r} of kernel {kernel} ({p.ctype}) must be a tensor of dtype "
                f"{' or '.join(map(str, p.pointees))}, got {a.dtype}"
            )
        if p.usize is not None and a.element_size() != p.usize:
            raise TypeError(
                f"argument {p.name!r} of kernel {kernel} ({p.ctype}) must be a tensor of "
                f"{p.usize}-byte elements, got {a.dtype}"
            )
        if device is None:
            device, first = a.get_device(), p.name
        elif a.get_device() != device:
            launch_devices(kernel, p.name, a.get_device(), first, device)
        if p.picks:
            if dtype is None:
                dtype = a.dtype
                if dtype not in CUDA_NAMES:
                    raise TypeError(
                        f"argument {p.name!r} of kernel {kernel} picks {template}; it must "
                        f"be {SUPPORTED_TEXT}, got {dtype}"
                    )
            elif a.dtype != dtype:
                raise TypeError(
                    f"argument {p.name!r} of kernel {kernel} must have dtype {dtype} "
                    f"({template} is {dtype}), got {a.dtype}"
                )
        values.append(a.data_ptr())
    if device is None:
        raise ValueError(f"kernel {kernel} needs at least one CUDA tensor argument to pick its device")
    if template and dtype is None:
        raise TypeError(
            f"kernel {kernel}: no tensor was passed for a parameter of type {template}*, so {template} is unknown"
        )
    for i in later:
        p = plan[i]
        kind = scalar_kind(p.kind, dtype)
        if kind != "f64":
            shown = CUDA_NAMES.get(dtype, "float") if p.kind == "t" else "float"
            values[i] = kernel_scalar(kernel, p.name, f"{p.ctype} ({shown})", kind, values[i])
    return device, dtype, values


# The scalar kinds the generated packer takes; the others (a template's T, f16, bf16, tmap) go
# through ``pack``.
_FAST_SCALARS = ("i32", "i64", "f32", "f64")


def fast(plan: list[Param], template: str | None, tensor: type = torch.Tensor):
    """``pack``'s common case, generated for one kernel as straight-line Python: ``fn(args)``
    returns ``pack``'s ``(device, dtype, values)`` where every pointer is a contiguous CUDA
    ``torch.Tensor`` (not a subclass, no negative or conjugate bit) of a dtype its type allows,
    all on one device, and every scalar a Python ``int`` / ``float`` well inside its C type;
    None for anything else, which
    ``pack`` then checks (raising what is wrong). No loop over the parameters and no Python call
    per argument: a user's op launches a small kernel in a few microseconds, where these checks
    were the largest part (docs/design.md#host-cost). None where the plan has a kind it does
    not take, or no pointer. ``tensor``: the class a pointer argument must be (a test's stand-in
    for CUDA tensors on a machine without a GPU)."""
    if not any(p.kind == "ptr" for p in plan) or any(p.kind not in ("ptr", *_FAST_SCALARS) for p in plan):
        return None
    env = {"Tensor": tensor, "NAMES": frozenset(CUDA_NAMES), "F32_MAX": F32_OVERFLOW}
    names = [f"a{i}" for i in range(len(plan))]
    body, values, device, picked = [f"({', '.join(names)},) = args"], [], None, None
    for i, (p, a) in enumerate(zip(plan, names)):
        if p.kind == "ptr":
            body.append(f"if {a}.__class__ is not Tensor or not {a}.is_cuda or not {a}.is_contiguous(): return None")
            body.append(f"if {a}.is_neg(): return None")
            if p.pointees is not None:
                env[f"P{i}"] = frozenset(p.pointees)
                body.append(f"if {a}.dtype not in P{i}: return None")
            if p.pointees is None or any(t.is_complex for t in p.pointees):  # (only complex has the bit)
                body.append(f"if {a}.is_conj(): return None")
            if p.usize is not None:
                body.append(f"if {a}.element_size() != {p.usize}: return None")
            if device is None:
                device = a
                body.append(f"d = {a}.get_device()")
            else:
                body.append(f"if {a}.get_device() != d: return None")
            if p.picks and picked is None:
                picked = a
                body.append(f"dt = {a}.dtype")
                body.append("if dt not in NAMES: return None")
            elif p.picks:
                body.append(f"if {a}.dtype is not dt: return None")
            values.append(f"{a}.data_ptr()")
        elif p.kind in ("i32", "i64"):
            lo, hi, _ = p.limits if p.limits is not None else RANGES["int" if p.kind == "i32" else "long long"]
            body.append(f"if {a}.__class__ is not int or not {lo} <= {a} <= {hi}: return None")
            # kernel_scalar's slots: unsigned 32-bit (i32), signed 64-bit (i64)
            if p.kind == "i32":
                values.append(f"{a} & 0xFFFFFFFF")
            else:
                values.append(a if hi < 2**63 else f"({a} - {2**64} if {a} >= {2**63} else {a})")
        else:  # f32 / f64: a float (an int, inf or NaN through pack)
            bound = f" or not -F32_MAX < {a} < F32_MAX" if p.kind == "f32" else ""
            body.append(f"if {a}.__class__ is not float{bound}: return None")
            values.append(a)
    if template and picked is None:
        return None
    body.append(f"return d, {'dt' if picked else 'None'}, [{', '.join(values)}]")
    code = "def fast(args):\n" + "".join(f"    {line}\n" for line in body)
    exec(compile(code, f"<cupy_ops fast packer: {len(plan)} parameters>", "exec"), env)
    return env["fast"]
