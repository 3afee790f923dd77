"""When a call of an op can launch straight away, and the autograd and autocast state the op
layer reads on every call (torch's private switches, bound once: the public ones cost more than
a small kernel's launch)."""

from __future__ import annotations

import torch

Tensor = torch.Tensor
# nn.Parameter is a plain tensor to torch's dispatch (its __torch_function__ is disabled): the
# eager path takes it as one, or every call with a module's weights would go through the
# dispatcher (2x the host time of a layer under autograd)
Parameter = torch.nn.Parameter
is_compiling = torch.compiler.is_compiling
grad_enabled = torch.is_grad_enabled
functorch_active = torch._C._are_functorch_transforms_active
dispatch_modes = torch._C._len_torch_dispatch_stack
jit_tracing = torch._C._get_tracing_state  # torch.jit.trace is recording (None: it is not)
fwd_ad = torch.autograd.forward_ad
increment_version = getattr(torch.autograd.graph, "increment_version", None) or torch._C._increment_version
AUTOCAST_POLICIES = (None, "lower", "fp32", "promote")
FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def bump_version(t: torch.Tensor) -> None:
    """Mark ``t`` as written, as torch's in-place and ``out=`` ops do (autograd refuses a
    backward that saved its old values)."""
    increment_version(t)


def plain_eager(tensors) -> bool:
    """Whether a call on ``tensors`` (None and non-tensors allowed) can launch directly: plain
    tensors (no subclass, no lazy conjugation or negation: a kernel would read ``z.conj()`` or
    ``z.conj().imag`` as their memory holds them), no dispatch mode (fake tensors, tracing), no
    torch.func transform, no forward-AD level. Autograd is the caller's question."""
    for t in tensors:
        if isinstance(t, Tensor) and (
            (type(t) is not Tensor and type(t) is not Parameter) or t.is_neg() or t.is_conj()
        ):
            return False
    return not (dispatch_modes() or functorch_active() or fwd_ad._current_level >= 0 or is_compiling() or jit_tracing())


def needs_grad(values) -> bool:
    """Grad mode is on and one of ``values`` is a tensor that requires grad: autograd records."""
    return grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in values)


# whether CUDA autocast is on: without an argument torch answers for CUDA in every version, and
# reads no device string (half the cost of ``is_autocast_enabled("cuda")``, on every eager call)
autocast_on = torch.is_autocast_enabled


def autocast_dtype() -> torch.dtype:
    get = getattr(torch, "get_autocast_dtype", None)
    return get("cuda") if get is not None else torch.get_autocast_gpu_dtype()
