"""One front door over every package's options: `compiler.config`.

Options are named `<package>.<option>` (`capture.verbose`, `inductor.fusion`, ...). Each
package declares, documents and reads (from the environment) its own options in its own
`config.py`; this module lists them, reads their values and patches them through each
package's API. It holds no option of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from compiler.validation import expect, unknown_name_message


@dataclass(frozen=True, slots=True)
class _Package:
    """How to reach one package's options: list them, read their values, patch them."""

    list_options: Callable[[], Mapping[str, str]]
    values: Callable[[], Mapping[str, object]]
    patch: Callable[[dict[str, object]], contextlib.AbstractContextManager[object]]


def _capture() -> _Package:
    import capture

    cfg = capture.config
    return _Package(cfg.list_options, cfg.to_dict, lambda changes: cfg.patch(**changes))


def _guards() -> _Package:
    from guards import config as guards_config

    return _Package(
        guards_config.list_options,
        lambda: dataclasses.asdict(guards_config.get_config()),
        lambda changes: guards_config.patch(**_ints(changes)),
    )


def _ints(changes: dict[str, object]) -> dict[str, int]:
    # NOTE: every guards option is an int; its patch() is typed so.
    for name, value in changes.items():
        expect("config.patch", f"guards.{name}", value, "an int",
               isinstance(value, int) and not isinstance(value, bool))
    return {name: int(value) for name, value in changes.items()}  # type: ignore[call-overload]  # checked above


def _aotgrad() -> _Package:
    from aotgrad import config as aotgrad_config

    return _Package(
        aotgrad_config.list_options,
        lambda: dataclasses.asdict(aotgrad_config.config()),
        lambda changes: aotgrad_config.patch(**changes),
    )


def _inductor() -> _Package:
    from inductor import config as inductor_config

    return _Package(
        inductor_config.list_options,
        inductor_config.options.snapshot,
        lambda changes: inductor_config.patch(changes),
    )


_PACKAGES: dict[str, Callable[[], _Package]] = {
    "capture": _capture,
    "guards": _guards,
    "aotgrad": _aotgrad,
    "inductor": _inductor,
}


class Config:
    """The options of every package under one name space (the object `compiler.config`).

    Examples:
        >>> import compiler
        >>> "capture.verbose" in compiler.config.list_options()
        True
        >>> compiler.config.get("capture.verbose")
        False
        >>> with compiler.config.patch({"capture.verbose": True}):
        ...     compiler.config.get("capture.verbose")
        True
        >>> compiler.config.get("capture.verbose")
        False
        >>> with compiler.config.patch(verbose=True):   # unique short names work too
        ...     compiler.config.get("verbose")
        True

    Notes:
        Environment variables (`CAPTURE_VERBOSE=1`, `INDUCTOR_FUSION=0`, ...) set defaults;
        each package reads its own, once, in its `config.py`. `capture.verbose` (env
        `CAPTURE_VERBOSE`) prints each compiled frame's FX graph, guards and original and
        transformed bytecode.
    """

    def list_options(self) -> dict[str, str]:
        """Every option as `<package>.<option>` mapped to its one-line help.

        Returns:
            A new dict, sorted by package then option name.
        """
        out: dict[str, str] = {}
        for package, reach in _PACKAGES.items():
            for name, help_text in sorted(reach().list_options().items()):
                out[f"{package}.{name}"] = help_text
        return out

    def as_dict(self) -> dict[str, object]:
        """The current value of every option, keyed `<package>.<option>`."""
        out: dict[str, object] = {}
        for package, reach in _PACKAGES.items():
            for name, value in sorted(reach().values().items()):
                out[f"{package}.{name}"] = value
        return out

    def get(self, name: str) -> object:
        """The current value of option `name` (`<package>.<option>` or a unique short name).

        Raises:
            TypeError: `name` is not a string.
            ValueError: no such option, or a short name shared by several packages.
        """
        expect("config.get", "name", name, "a str", isinstance(name, str))
        package, option = self._qualify(name)
        return _PACKAGES[package]().values()[option]

    @contextlib.contextmanager
    def patch(
        self, changes: Mapping[str, object] | None = None, **kwargs: object
    ) -> Iterator[None]:
        """Within the `with` block, give options new values; restore them afterwards.

        Args:
            changes: Option name (`<package>.<option>` or a unique short name) to value.
            **kwargs: More changes by unique short name (`patch(verbose=True)`).

        Raises:
            TypeError: `changes` is not a mapping, a name is not a string, or a value has the
                wrong type for its option (the package checks values).
            ValueError: an unknown option name (the message lists the closest names).
        """
        expect("config.patch", "changes", changes, "a mapping or None",
               changes is None or isinstance(changes, Mapping))
        grouped: dict[str, dict[str, object]] = {}
        for name, value in {**(changes or {}), **kwargs}.items():
            expect("config.patch", "changes", name, "a mapping with str keys",
                   isinstance(name, str))
            package, option = self._qualify(name)
            grouped.setdefault(package, {})[option] = value
        with contextlib.ExitStack() as stack:
            for package, values in grouped.items():
                stack.enter_context(_PACKAGES[package]().patch(values))
            yield

    def _qualify(self, name: str) -> tuple[str, str]:
        options = self.list_options()
        if name in options:
            package, _, option = name.partition(".")
            return package, option
        owners = [q for q in options if q.partition(".")[2] == name]
        if len(owners) == 1:
            package, _, option = owners[0].partition(".")
            return package, option
        if len(owners) > 1:
            raise ValueError(
                f"option name {name!r} is ambiguous; use one of {', '.join(owners)}"
            )
        raise ValueError(unknown_name_message("option", name, options))

    def __repr__(self) -> str:
        return f"<compiler.config: {len(self.list_options())} options; see list_options()>"


config = Config()
"""The one configuration front door (an instance of `Config`)."""
