"""An op's eager call generated as straight-line Python for its own parameters.

``Op.call(args)`` is the path of every eager call (``op(...)`` and the built-ins' functions).
Its general form (``Op._call_any``) loops over the tensor slots and goes through ``impl``,
``_check_devices`` and ``_contiguous``: five Python calls and their attribute look-ups before the
launcher, ~1.7 us of a relu's 11 (docs/design.md#host-cost). ``entry`` writes the same checks
out for one op, its slots unrolled, and hands anything but the common case (plain CUDA tensors,
nothing for autocast, forward AD, torch.func, a dispatch mode or torch.jit.trace to see) to the
general form, which decides it as before; a call autograd records goes to the op's
``autograd.Function`` as the general form sends it.
"""

from __future__ import annotations

import torch

from .eager import Parameter, Tensor, autocast_on, dispatch_modes, functorch_active, fwd_ad, grad_enabled, jit_tracing
from .schema import like


def entry(op, general):
    """``op``'s eager call ``fn(args)``, ``args`` a tuple of every input in order: what
    ``general(args)`` returns, with the common case written out."""
    n = op._n
    a = [f"a{i}" for i in range(n)]
    env = {
        "Tensor": Tensor,
        "Parameter": Parameter,
        "grad_enabled": grad_enabled,
        "dispatch_modes": dispatch_modes,
        "functorch_active": functorch_active,
        "fwd_ad": fwd_ad,
        "jit_tracing": jit_tracing,
        "autocast_on": autocast_on,
        "general": general,
        "eager_apply": op._eager_apply,
        "fast": op.fast,
        "output": op.output,
        "launch": op.launch,
        "check_devices": op._check_devices,
        "empty_like": torch.empty_like,
    }
    tensors = list(op._tensor_idx)
    optional = op._optional
    plain, grads = [], []
    for i in tensors:
        t = f"({a[i]}.__class__ is Tensor or {a[i]}.__class__ is Parameter)"
        t += f" and not {a[i]}.is_neg() and not {a[i]}.is_conj()"
        plain.append(f"({a[i]} is None or ({t}))" if i in optional else t)
        grads.append(f"({a[i]} is not None and {a[i]}.requires_grad)" if i in optional else f"{a[i]}.requires_grad")
    cond = plain + ["not dispatch_modes()", "not functorch_active()", "fwd_ad._current_level < 0", "not jit_tracing()"]
    if op.autocast is not None:
        cond.append("not autocast_on()")
    arglist = ", ".join(a)
    body = [f"({arglist},) = args" if n else "pass", "if (" + "\n        and ".join(cond) + "\n    ):"]
    inner = []
    if grads:  # autograd records: the op's autograd.Function, as the general path runs it
        inner += [f"if ({' or '.join(grads)}) and grad_enabled():", f"    return eager_apply({arglist})"]
    if op.fast is not None:
        inner += [f"r = fast({arglist})", "if r is not None:", "    return r"]
    out, call = op.output, f"output({arglist})"
    if isinstance(out, like) and out.index not in optional:
        call = out.expression(a[out.index], call)
    inner.append(f"out = {call}")
    if op.check_devices and tensors:
        first = tensors[0]
        if first in optional:
            inner.append("check_devices(args)")
        else:
            others = [
                f"({a[i]} is not None and {a[i]}.get_device() != d)" if i in optional else f"{a[i]}.get_device() != d"
                for i in tensors[1:]
            ]
            inner.append(f"d = {a[first]}.get_device()")
            inner.append(f"if {' or '.join(['d < 0'] + others)}:")
            inner.append("    check_devices(args)  # raises, naming the tensor")
    if op.contiguous:
        for i in tensors:
            guard = f"{a[i]} is not None and " if i in optional else ""
            inner.append(f"if {guard}not {a[i]}.is_contiguous():")
            inner.append(f"    {a[i]} = {a[i]}.contiguous()")
    inner += [f"launch({arglist}{', ' if n else ''}out=out)", "return out"]
    body += [f"    {line}" for line in inner]
    body.append("return general(args)")
    code = "def call(args):\n" + "".join(f"    {line}\n" for line in body)
    exec(compile(code, f"<cupy_ops eager call of {op.qualname}>", "exec"), env)
    return env["call"]
