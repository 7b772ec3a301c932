"""Options and modes for `compiler.compile(mode=..., options=...)`.

The option tables are the packages' own (`<package>.config`), reached through
`compiler.config`; the mode table is inductor's (`inductor.config.list_mode_options()`).
This module lists them and checks a compile call's options; capture then applies capture's
and guards' options to the compiled wrapper and passes the others to the backend as its
`options` argument.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, overload

from compiler.config import config, package_config
from compiler.validation import expect, unknown_name_message

#: Packages whose options a compiled wrapper applies itself (the rest go to the backend).
WRAPPER_PACKAGES = ("capture", "guards")


def list_options() -> dict[str, str]:
    """List every option of the compiler stack, with a one-line help each.

    Returns:
        A new dict mapping `<package>.<option>` (`capture.suppress_errors`,
        `guards.cache_size_limit`, `aotgrad.partitioner`, `inductor.fusion`, ...) to its
        help text, which names the option's environment variable.

    Examples:
        >>> import compiler
        >>> opts = compiler.list_options()
        >>> all(isinstance(k, str) and isinstance(v, str) for k, v in opts.items())
        True
        >>> "inductor.fusion" in opts and "guards.cache_size_limit" in opts
        True

    Notes:
        The same table as `compiler.config.list_options()`. Any option can be given to
        `compiler.compile(..., options={name: value})` (for that compiled function only) or
        changed for a block with `compiler.config.patch(name=value)`; a name only one
        package declares may be given without its package.

        Activation memory of training graphs (aot_eager and inductor): `compile(model,
        options={"activation_memory_budget": 0.5})` saves at most half the activation
        bytes of budget 1.0 (the default, min-cut) and recomputes the rest in the backward,
        cheapest recompute time per byte first (`solver`: dp, greedy or ilp; `estimator`:
        flops, profile or testing); `"pareto_svg": path` writes the memory/recompute
        curve with the chosen point marked. A budget outside [0, 1] or an unknown solver
        or estimator is a ValueError at `compile`.

        >>> opts["aotgrad.activation_memory_budget"].startswith("fraction in [0, 1]")
        True
    """
    return config.list_options()


@overload
def list_mode_options(mode: None = None) -> dict[str, dict[str, object]]: ...


@overload
def list_mode_options(mode: str) -> dict[str, object]: ...


def list_mode_options(mode: str | None = None) -> dict[str, dict[str, object]] | dict[str, object]:
    """List the compilation modes and the option values each one sets.

    Args:
        mode: A mode name such as `"max-autotune"`; `None` lists every mode.

    Returns:
        With `mode=None`, a dict from mode name to that mode's option values (inductor
        option names); otherwise the option values of `mode` alone.

    Raises:
        TypeError: `mode` is neither a string nor None.
        ValueError: `mode` is not a known mode (the message lists the closest names).

    Examples:
        >>> import compiler
        >>> sorted(compiler.list_mode_options())[:2]
        ['default', 'max-autotune']
        >>> compiler.list_mode_options("default")
        {}

    Notes:
        The table is `inductor.config.list_mode_options()`, as `torch.compile`'s modes map to
        inductor settings.
    """
    expect("list_mode_options", "mode", mode, "a str or None", mode is None or isinstance(mode, str))
    table: Any = package_config("inductor").list_mode_options()
    modes: dict[str, dict[str, object]] = {name: dict(values) for name, values in table.items()}
    if mode is None:
        return modes
    if mode not in modes:
        raise ValueError(unknown_name_message("mode", mode, modes))
    return modes[mode]


def resolve_options(
    backend: str, backend_fn: Any, mode: str | None, options: Mapping[str, object] | None
) -> dict[str, object]:
    """A compile call's option values, keyed `<package>.<option>`, checked by name and type
    and against what the backend accepts."""
    if mode is not None and options is not None:
        raise RuntimeError(
            "compile() takes either `mode` or `options`, not both (as torch.compile)"
        )
    values: dict[str, object] = {}
    if mode is not None:
        values = {f"inductor.{k}": v for k, v in list_mode_options(mode).items()}
    if options:
        for package, changes in config.group(options, "compile").items():
            values.update({f"{package}.{k}": v for k, v in changes.items()})
    for_backend = sorted(q for q in values if q.partition(".")[0] not in WRAPPER_PACKAGES)
    if not for_backend:
        return values
    inductor_only = [q for q in for_backend if q.startswith("inductor.")]
    if backend != "inductor" and (inductor_only or mode is not None):
        raise RuntimeError(
            f"compile(mode=..., options={{'inductor.*': ...}}) applies to the inductor backend "
            f"only, not to backend {backend!r} ({', '.join(inductor_only) or mode})"
        )
    if not _takes_options(backend_fn):
        raise ValueError(
            f"backend {backend!r} takes no options, so {', '.join(for_backend)} cannot apply "
            "(a backend takes them as `backend(gm, example_inputs, options=...)`)"
        )
    return values


def _takes_options(backend_fn: Any) -> bool:
    try:
        return "options" in inspect.signature(backend_fn).parameters
    except (TypeError, ValueError):
        return False
