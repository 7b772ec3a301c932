"""One front door over every package's options: `compiler.config`.

Options are named `<package>.<option>` (`capture.verbose`, `inductor.fusion`, ...); a name
that only one package declares may be given short (`verbose`). Each package declares,
documents and reads (from the environment) its own options in its own `config.py`, all in
the same shape (`options`, `patch`, `list_options`, `values`, `declared`, `replace`), so this
module reaches them all the same way. It holds no option of its own.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType

from compiler.validation import expect, unknown_name_message

#: The packages with options, in listing order (each has a `config` module).
PACKAGES = ("capture", "guards", "aotgrad", "inductor")


def package_config(package: str) -> ModuleType:
    """The `config` module of `package` (imported on first use)."""
    return importlib.import_module(f"{package}.config")


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
        >>> with compiler.config.patch(cache_size_limit=16):   # unique short names work too
        ...     compiler.config.get("guards.cache_size_limit")
        16

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
        for package in PACKAGES:
            for name, help_text in sorted(package_config(package).list_options().items()):
                out[f"{package}.{name}"] = help_text
        return out

    def as_dict(self) -> dict[str, object]:
        """The current value of every option, keyed `<package>.<option>`."""
        out: dict[str, object] = {}
        for package in PACKAGES:
            for name, value in sorted(package_config(package).values().items()):
                out[f"{package}.{name}"] = value
        return out

    def get(self, name: str) -> object:
        """The current value of option `name` (`<package>.<option>` or a unique short name).

        Raises:
            TypeError: `name` is not a string.
            ValueError: no such option, or a short name shared by several packages.
        """
        expect("config.get", "name", name, "a str", isinstance(name, str))
        package, option = self.qualify(name)
        value: object = getattr(package_config(package).options, option)
        return value

    def group(self, changes: Mapping[str, object], function: str) -> dict[str, dict[str, object]]:
        """`changes` by package (short option names), checked by name and type."""
        grouped: dict[str, dict[str, object]] = {}
        for name, value in changes.items():
            expect(function, "options", name, "a mapping with str keys", isinstance(name, str))
            package, option = self.qualify(name)
            grouped.setdefault(package, {})[option] = value
        for package, values in grouped.items():
            package_config(package).replace(values)
        return grouped

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
                wrong type for its option.
            ValueError: an unknown option name (the message lists the closest names).
        """
        expect("config.patch", "changes", changes, "a mapping or None",
               changes is None or isinstance(changes, Mapping))
        grouped = self.group({**(changes or {}), **kwargs}, "config.patch")
        with contextlib.ExitStack() as stack:
            for package, values in grouped.items():
                stack.enter_context(package_config(package).patch(values))
            yield

    def qualify(self, name: str) -> tuple[str, str]:
        """(package, option) for `<package>.<option>` or a unique short name."""
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
        short = {q.partition(".")[2] for q in options}
        raise ValueError(unknown_name_message("option", name, [*options, *short]))

    def __repr__(self) -> str:
        return f"<compiler.config: {len(self.list_options())} options; see list_options()>"


config = Config()
"""The one configuration front door (an instance of `Config`)."""
