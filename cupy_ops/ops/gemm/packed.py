"""Prepacked weights: a Linear weight's fp16x3 pieces kept across calls for float32 at fp32
accuracy (``algo="accurate"`` / ``"fp16x3"``), so that a call splits only its input. Built on
the first call that plans fp16x3 over them, rebuilt when the weight changes (docs/prepack.md).

A weight is known by its identity; its pieces by what they were built from: the version
counter (an optimizer step, ``load_state_dict``, any in-place edit bumps it), storage address,
shape, strides, dtype and device. An edit through ``weight.data`` bumps no counter: call
``prepack`` again after one.
"""

from __future__ import annotations

import weakref

import torch

from ... import checks, launch
from .fp16x3 import Pieces

_Tensor = torch.Tensor
_capturing = torch.cuda.is_current_stream_capturing


class _Entry:
    """A prepacked weight: a weak reference to it, its pieces (None until a call builds them),
    the state they were built from, the event that marks them built and the streams that have
    waited for it."""

    __slots__ = ("built", "pieces", "ref", "state", "streams")

    def __init__(self, ref: weakref.ref):
        self.ref, self.pieces, self.state, self.built, self.streams = ref, None, None, None, ()

    def pieces_for(self, weight: torch.Tensor) -> Pieces | None:
        """The pieces of ``weight`` as it is now, rebuilt if it changed since, ready on the
        current stream; None while a CUDA graph is being captured (a replay must read the
        weight as it is then, not as it was)."""
        if _capturing():
            return None
        device = weight.get_device()
        stream = launch.current_stream_handle(device)
        state = (weight._version, weight.data_ptr(), weight.shape, weight.stride(), weight.dtype, weight.device)
        if self.state != state:
            self.pieces = None  # (its memory back before the new pieces take theirs)
            self.pieces = Pieces(weight.detach())
            self.state, self.streams = state, (stream,)
            self.built = torch.cuda.Event()
            self.built.record(torch.cuda.current_stream(device))
        elif stream not in self.streams:
            # another stream: it waits for the build once, and the memory is not reused while
            # its work may still read it
            current = torch.cuda.current_stream(device)
            current.wait_event(self.built)
            self.pieces.ws.record_stream(current)
            self.streams += (stream,)
        return self.pieces


_entries: dict[int, _Entry] = {}


def _weights(obj, name: str) -> list[torch.Tensor]:
    if isinstance(obj, torch.nn.Module):
        ws = [m.weight for m in obj.modules() if isinstance(m, torch.nn.Linear)]
        if not ws:
            raise ValueError(f"{name} has no nn.Linear: pass the weight tensors to prepack instead")
        return ws
    if not isinstance(obj, _Tensor):
        raise TypeError(f"{name} must be an nn.Module or a weight tensor, got {type(obj).__name__}")
    return [obj]


def prepack(obj):
    """Keep the fp16x3 pieces of ``obj``'s weights across calls: a float32 call of
    ``linear`` / ``linear_relu_div`` (``algo="accurate"`` where it plans fp16x3, or
    ``algo="fp16x3"``) with one of them then splits only its input. The pieces are built by the
    first such call, rebuilt when the weight changes (its version counter, storage, shape,
    strides, dtype or device), and take the weight's size again in GPU memory (fp16 hi and lo
    per element). Off unless asked for; forward only (gradients read the weight as usual); not
    under CUDA graph capture. Calling it again forgets the pieces (after an edit through
    ``weight.data``, which bumps no version counter).

    Args:
        obj: an ``nn.Module`` (the weight of every ``nn.Linear`` in it) or a weight tensor
            (out_features, in_features), float32 on a CUDA device.
    Returns:
        ``obj``.
    Raises:
        TypeError: ``obj`` is neither, or a weight is not float32. ValueError: a weight is not
        2-D or not on a CUDA device, or a module has no ``nn.Linear``.

    Example:
        >>> model = cupy_ops.prepack(model)   # a Linear model, float32, for inference
    """
    weights = _weights(obj, "obj")
    for w in weights:
        if w.dtype != torch.float32:
            raise TypeError(f"prepack: weight must be float32 (fp16x3's pieces), got {w.dtype}")
        if w.dim() != 2:
            raise ValueError(f"prepack: weight must be 2-D (out_features, in_features), got shape {tuple(w.shape)}")
        checks.on_cuda("weight", w)
    for w in weights:
        key = id(w)
        _entries[key] = _Entry(weakref.ref(w, lambda _r, key=key: _forget(key, _r)))
    return obj


def unprepack(obj) -> None:
    """Forget the pieces of ``obj``'s weights (an ``nn.Module``'s ``nn.Linear`` weights, or a
    tensor), giving their memory back; calls read the weights again. Weights never prepacked
    are ignored."""
    for w in _weights(obj, "obj"):
        e = _entries.get(id(w))
        if e is not None and e.ref() is w:
            del _entries[id(w)]


def prepacked_bytes(obj=None) -> int:
    """GPU memory held by the pieces of ``obj``'s weights (every prepacked weight's: None), in
    bytes; 0 for pieces not built yet."""
    if obj is None:
        entries = list(_entries.values())
    else:
        entries = [e for w in _weights(obj, "obj") if (e := _entries.get(id(w))) is not None and e.ref() is w]
    return sum(e.pieces.nbytes for e in entries if e.pieces is not None)


def lookup(weight: torch.Tensor) -> _Entry | None:
    """The entry of ``weight`` where it is prepacked (the GEMM's hot path: one dict lookup,
    none while nothing is prepacked)."""
    if not _entries:
        return None
    e = _entries.get(id(weight))
    return e if e is not None and e.ref() is weight else None


def _forget(key: int, ref: weakref.ref) -> None:
    e = _entries.get(key)
    if e is not None and e.ref is ref:
        del _entries[key]
