"""What a declaration is read into: the output rule (``like``), the schema text of each
parameter, and the ``Context`` a backward or jvp rule receives."""

from __future__ import annotations

import inspect
import typing

import torch

from .eager import Tensor

# --- output rules ------------------------------------------------------------------------------

_PRESERVE = torch.preserve_format


class like:
    """Output rule: a tensor like input ``name`` (``torch.empty_like``: its shape, dtype and
    device), or of ``dtype``. Contiguous for an op whose launcher is given contiguous inputs
    (``contiguous=True``, the default: its kernel indexes all of them alike); otherwise the
    strides torch gives a dense input (a transposed or channels_last one keeps its layout),
    contiguous for any other."""

    def __init__(self, name: str, *, dtype: torch.dtype | None = None):
        if not isinstance(name, str):
            raise TypeError(f"like() takes the name of an input, got {name!r}")
        self.name = name
        self.dtype = dtype
        self.index = None  # bound by the op
        self.memory_format = torch.preserve_format  # ... and this, by its ``contiguous``

    def __call__(self, *args, device=None):
        t = args[self.index]
        if device is None and self.dtype is None and (self.memory_format is _PRESERVE or t.is_contiguous()):
            return torch.empty_like(t)  # the same tensor: keyword arguments cost torch a parse
        return torch.empty_like(t, dtype=self.dtype or t.dtype, memory_format=self.memory_format, device=device)

    def expression(self, t: str, call: str) -> str:
        """This rule as Python source for a generated call (op/direct.py): on input ``t``, with
        ``call`` (the rule called) where ``__call__`` passes keyword arguments."""
        if self.dtype is not None:
            return call
        if self.memory_format is _PRESERVE:
            return f"empty_like({t})"
        return f"empty_like({t}) if {t}.is_contiguous() else {call}"

    def __repr__(self) -> str:
        return f"like({self.name!r}{'' if self.dtype is None else f', dtype={self.dtype}'})"


# --- schema ------------------------------------------------------------------------------------

# A float parameter is a Scalar to torch: torch.compile then traces a fresh value as a symbolic
# float after one recompile, as it traces ``t * s`` (as "float" every value recompiled and the
# ninth was an error under fullgraph=True; torch 2.11 measured, 2.4 specializes either way)
SCHEMA_TYPES = {Tensor: "Tensor", float: "Scalar", int: "SymInt", bool: "bool", str: "str"}


def schema_type(op_name: str, pname: str, ann) -> tuple[str, bool]:
    """The schema type of a launcher parameter's annotation, and whether it is a tensor."""
    if isinstance(ann, str):
        raise TypeError(
            f"op {op_name}: parameter {pname!r} is annotated by a string ({ann!r}); annotate with "
            f"the type itself (no `from __future__ import annotations` in the launcher's module)"
        )
    if ann in SCHEMA_TYPES:
        return SCHEMA_TYPES[ann], ann is Tensor
    args = typing.get_args(ann)
    if len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        if inner in SCHEMA_TYPES:
            return SCHEMA_TYPES[inner] + "?", inner is Tensor
    raise TypeError(
        f"op {op_name}: parameter {pname!r} has annotation {ann!r}; an op takes torch.Tensor, "
        f"Optional[torch.Tensor], float, int, bool or str"
    )


def default_text(v) -> str:
    if v is None:
        return "None"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


class Param:
    __slots__ = ("default", "index", "name", "tensor", "type")

    def __init__(self, name, type_, tensor, default, index):
        self.name, self.type, self.tensor, self.default, self.index = name, type_, tensor, default, index

    def text(self, mutable: str | None = None) -> str:
        t = self.type if mutable is None else f"Tensor({mutable}!)"
        d = "" if self.default is inspect.Parameter.empty else "=" + default_text(self.default)
        return f"{t} {self.name}{d}"


# --- what a rule receives -----------------------------------------------------------------------


class Context:
    """What a ``backward`` or ``jvp`` rule receives: the saved inputs (and ``out``, the output)
    as attributes by name, and ``needs_grad(name)``: whether autograd wants that input's gradient."""

    def __init__(self, values: dict, needs: dict):
        self.__dict__.update(values)
        self._needs = needs

    def needs_grad(self, name: str) -> bool:
        return self._needs.get(name, False)
