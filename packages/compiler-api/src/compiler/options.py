"""Backend options and modes for `compiler.compile(mode=..., options=...)`.

The option and mode tables live in `inductor.config` (`list_options()`,
`list_mode_options()`); this module only reads them, validates names against them, and wraps
the inductor backend so its compile runs under the chosen option values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, overload

import torch

from compiler.validation import expect, unknown_name_message


def _inductor_config() -> Any:
    # NOTE: imported on use so `import compiler` stays cheap and works while inductor is
    # partially built; the tables themselves are always inductor's.
    from inductor import config

    return config


def list_options() -> dict[str, str]:
    """List the options `compiler.compile(options=...)` accepts, with a one-line help each.

    The options are the inductor backend's (read from `inductor.config`), like
    `torch.compiler.list_options()`.

    Returns:
        A new dict mapping each option name to its help text.

    Examples:
        >>> import compiler
        >>> opts = compiler.list_options()
        >>> all(isinstance(k, str) and isinstance(v, str) for k, v in opts.items())
        True
        >>> "fusion" in opts
        True

    Notes:
        Every option also has an environment variable, named in the inductor package's
        `config.py`; `compiler.config.patch({"inductor.<name>": value})` changes one for a
        block of code.
    """
    options: dict[str, str] = dict(_inductor_config().list_options())
    return options


@overload
def list_mode_options(mode: None = None) -> dict[str, dict[str, object]]: ...


@overload
def list_mode_options(mode: str) -> dict[str, object]: ...


def list_mode_options(mode: str | None = None) -> dict[str, dict[str, object]] | dict[str, object]:
    """List the compilation modes and the option values each one sets.

    Args:
        mode: A mode name such as `"max-autotune"`; `None` lists every mode.

    Returns:
        With `mode=None`, a dict from mode name to that mode's option values; otherwise the
        option values of `mode` alone.

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
    modes: dict[str, dict[str, object]] = {
        name: dict(values) for name, values in _inductor_config().list_mode_options().items()
    }
    if mode is None:
        return modes
    if mode not in modes:
        raise ValueError(unknown_name_message("mode", mode, modes))
    return modes[mode]


def resolve_options(
    mode: str | None, options: Mapping[str, object] | None
) -> dict[str, object]:
    """The inductor option values for `mode` and `options`, validated by name and type."""
    if mode is not None and options is not None:
        raise RuntimeError(
            "compile() takes either `mode` or `options`, not both (as torch.compile)"
        )
    values = dict(list_mode_options(mode)) if mode is not None else {}
    if options:
        known = list_options()
        for key in options:
            expect("compile", "options", key, "a mapping with str keys", isinstance(key, str))
            if key not in known:
                raise ValueError(unknown_name_message("option", key, known))
        values.update(options)
    if values:
        # Delegate value/type validation to inductor now, so mistakes surface at compile().
        with _inductor_config().patch(values):
            pass
    return values


class ConfiguredBackend:
    """A backend that runs another one under `inductor.config.patch(options)`.

    The compile of each captured graph happens inside the patch, so the options reach code
    generation; the name stays the wrapped backend's for error messages.
    """

    def __init__(self, name: str, backend: Callable[..., Any], options: dict[str, object]):
        self.__name__ = name
        self.__qualname__ = name
        self.backend = backend
        self.options = options

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        with _patched(self.options):
            return self.backend(gm, example_inputs)

    def __repr__(self) -> str:
        return f"ConfiguredBackend({self.__name__!r}, options={self.options!r})"


@contextlib.contextmanager
def _patched(values: dict[str, object]) -> Iterator[None]:
    with _inductor_config().patch(values):
        yield
