"""`mark_dynamic`, `maybe_mark_dynamic` and `mark_static`: per-dimension control of dynamic
shapes, delegating to `capture.shapes` (which reads the marks when it wraps a tensor)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from capture import shapes

from compiler.validation import expect

__all__ = ["mark_dynamic", "mark_static", "maybe_mark_dynamic"]


def _check_dims(api: str, t: object, dim: object) -> None:
    expect(api, "t", t, "a torch.Tensor", isinstance(t, torch.Tensor))
    ok = isinstance(dim, int) and not isinstance(dim, bool) or (
        isinstance(dim, Sequence) and not isinstance(dim, str)
        and all(isinstance(d, int) and not isinstance(d, bool) for d in dim))
    expect(api, "dim", dim, "an int or a sequence of ints", ok)


def mark_dynamic(t: torch.Tensor, dim: int | Sequence[int], min: int | None = None,
                 max: int | None = None) -> None:
    """Compile `t`'s dimension `dim` with a symbolic size from the first call on.

    Without the mark, a size is static on the first compile and becomes symbolic only
    after a call with another size recompiles (automatic dynamic shapes). Marking saves
    that first static compile: one compiled graph serves every size of the dimension that
    satisfies its guards.

    Args:
        t: The tensor whose dimension is marked (the mark is an attribute of this tensor
            object; pass this same tensor to the compiled function).
        dim: The dimension (negative counts from the end), or several.
        min: The smallest size the compiled code must accept (default: 2; sizes 0 and 1
            are always compiled separately).
        max: The largest size it must accept (default: unbounded).

    Returns:
        None.

    Raises:
        TypeError: `t` is not a tensor, or `dim` is not an int or a sequence of ints.
        IndexError: `dim` is out of range for `t`.
        capture.shape_guards.ConstraintViolation: when the compiled function is called,
            if the program specializes the dimension to one value (uses it as a Python
            number, or branches on its exact value): the message names the user's line.
            Use `maybe_mark_dynamic` where that is acceptable.

    Examples:
        >>> import torch, compiler
        >>> f = compiler.compile(lambda x: x * 2, backend="eager")
        >>> x = torch.ones(8, 3)
        >>> compiler.mark_dynamic(x, 0)
        >>> f(x).shape
        torch.Size([8, 3])
        >>> f(torch.ones(5, 3)).shape      # served by the same symbolic graph
        torch.Size([5, 3])

    Notes:
        The same call torch.compile users know as `mark_dynamic`. Under `compile(dynamic=False)` marked
        dimensions are still symbolic (only automatic dynamic shapes are off).
    """
    _check_dims("mark_dynamic", t, dim)
    expect("mark_dynamic", "min", min, "an int or None", min is None or isinstance(min, int))
    expect("mark_dynamic", "max", max, "an int or None", max is None or isinstance(max, int))
    shapes.mark_dynamic(t, dim if isinstance(dim, int) else tuple(dim), min, max)


def maybe_mark_dynamic(t: torch.Tensor, dim: int | Sequence[int]) -> None:
    """Compile `t`'s dimension `dim` with a symbolic size from the first call on, unless
    the program needs its value: then it is specialized without an error.

    Args:
        t: The tensor whose dimension is marked (an attribute of this tensor object).
        dim: The dimension (negative counts from the end), or several.

    Returns:
        None.

    Raises:
        TypeError: `t` is not a tensor, or `dim` is not an int or a sequence of ints.
        IndexError: `dim` is out of range for `t`.

    Examples:
        >>> import torch, compiler
        >>> f = compiler.compile(lambda x: x.sum(0), backend="eager")
        >>> x = torch.ones(4, 2)
        >>> compiler.maybe_mark_dynamic(x, 0)
        >>> f(x)
        tensor([4., 4.])

    Notes:
        A hint, like torch.compile's `maybe_mark_dynamic`: use it where a specialization is
        acceptable; `mark_dynamic` makes a specialization an error.
    """
    _check_dims("maybe_mark_dynamic", t, dim)
    shapes.maybe_mark_dynamic(t, dim if isinstance(dim, int) else tuple(dim))


def mark_static(t: torch.Tensor | torch.nn.Module, dim: int | None = None) -> None:
    """Keep `t`'s dimension `dim` static (compiled for its exact size), even under
    `compile(dynamic=True)` or after its size changed (automatic dynamic shapes).

    Args:
        t: A tensor, or a module: then every parameter and buffer of the module (and of
            its submodules) keeps static sizes.
        dim: The dimension (negative counts from the end); None (default) for all.

    Returns:
        None.

    Raises:
        TypeError: `t` is neither a tensor nor a module, or `dim` is not an int or None.
        IndexError: `dim` is out of range for `t`.

    Examples:
        >>> import torch, compiler
        >>> f = compiler.compile(lambda x: x + 1, backend="eager", dynamic=True)
        >>> x = torch.zeros(3, 2)
        >>> compiler.mark_static(x, 1)
        >>> f(x)[0]
        tensor([1., 1.])

    Notes:
        Parameters and buffers of modules are static by default (unless marked with
        `mark_dynamic`); marking a module also overrides such marks on its tensors.
    """
    expect("mark_static", "t", t, "a torch.Tensor or torch.nn.Module",
           isinstance(t, (torch.Tensor, torch.nn.Module)))
    expect("mark_static", "dim", dim, "an int or None",
           dim is None or isinstance(dim, int) and not isinstance(dim, bool))
    shapes.mark_static(t, dim)
