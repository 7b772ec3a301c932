"""Declarative options, the one pattern every package's `config.py` follows.

A package declares its options as the fields of one frozen dataclass, each with
`option(default, env=..., help=...)` (the type is the field's annotation). `OptionSet` holds
the values in effect: read once from the environment mapping that the package's `config.py`
passes (no other module reads the environment), published as the module attribute
`options`, overridden in a block by `patch(...)`, listed by `list_options()`.

NOTE: guards/optionset.py and aotgrad/optionset.py are the same file (the two package
families share no dependency); tests/compiler/test_options.py checks that they agree.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

C = TypeVar("C")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclasses.dataclass(frozen=True, slots=True)
class Option:
    """One declared option: name, type, default, environment variable and one line of help."""

    name: str
    type: Any
    default: object
    env: str
    help: str
    #: The environment variable's text -> value (default: by `type`).
    parse: Callable[[str], object] | None = None
    #: The option changes generated code (part of compiled-artifact cache keys).
    affects_codegen: bool = False

    def from_text(self, text: str) -> object:
        """The value that the environment variable's `text` stands for."""
        if self.parse is not None:
            return self.parse(text)
        kinds = _kinds(self.type)
        word = text.strip().lower()
        if bool in kinds:
            if word in _TRUE or word in _FALSE:
                return word in _TRUE
        elif int in kinds:
            return int(text)
        elif float in kinds:
            return float(text)
        elif str in kinds:
            return None if text == "" and type(None) in kinds else text
        raise ValueError(f"{self.env}={text!r}: not a value of option {self.name!r}")

    def check(self, value: object) -> object:
        """`value` if it has this option's type (an int is accepted for a float), else TypeError."""
        kinds = _kinds(self.type)
        if isinstance(value, bool) and bool not in kinds:
            ok = False
        elif float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        else:
            ok = isinstance(value, kinds)
        if not ok:
            raise TypeError(f"option {self.name!r} expects {_type_text(self.type)}, "
                            f"got {type(value).__name__} {value!r}")
        return value


def option(default: Any, *, env: str, help: str, parse: Callable[[str], object] | None = None,
           affects_codegen: bool = False) -> Any:
    """Declare a dataclass field as an option (see the module docstring)."""
    spec = {"env": env, "help": help, "parse": parse, "affects_codegen": affects_codegen}
    return dataclasses.field(default=default, metadata={"option": spec})


def _kinds(annotation: Any) -> tuple[type, ...]:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return tuple(typing.get_args(annotation))
    return (annotation,)


def _type_text(annotation: Any) -> str:
    return " or ".join(getattr(k, "__name__", str(k)) for k in _kinds(annotation))


class OptionSet(Generic[C]):
    """The options of one package: declarations, values in effect, `patch` and listing.

    `namespace` is the package's `config` module namespace: its attribute `options` always
    holds the values in effect (a frozen `cls` instance).
    """

    def __init__(self, package: str, cls: type[C], environ: Mapping[str, str],
                 namespace: dict[str, Any]) -> None:
        self.package = package
        self.cls = cls
        hints = typing.get_type_hints(cls)
        self.declared: dict[str, Option] = {
            f.name: Option(f.name, hints[f.name], f.default, **f.metadata["option"])
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]  # cls is a dataclass
        }
        self._namespace = namespace
        namespace["options"] = self.load(environ)

    def load(self, environ: Mapping[str, str]) -> C:
        """Defaults overridden by the options' variables in `environ`."""
        values = {name: opt.from_text(environ[opt.env])
                  for name, opt in self.declared.items() if opt.env in environ}
        return self.cls(**values)

    @property
    def current(self) -> C:
        """The values in effect."""
        current: C = self._namespace["options"]
        return current

    def replace(self, changes: Mapping[str, object]) -> C:
        """The values in effect with `changes` applied, checked by name and type."""
        checked = {name: self.lookup(name).check(value) for name, value in changes.items()}
        return dataclasses.replace(self.current, **checked)  # type: ignore[type-var]  # dataclass

    def lookup(self, name: str) -> Option:
        """The declaration of `name`; ValueError naming the closest options if unknown."""
        found = self.declared.get(name)
        if found is None:
            close = difflib.get_close_matches(name, self.declared, n=3, cutoff=0.5)
            hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise ValueError(f"unknown {self.package} option {name!r}.{hint} "
                             f"Valid: {', '.join(sorted(self.declared))}")
        return found

    @contextlib.contextmanager
    def patch(self, changes: Mapping[str, object] | None = None,
              **kwargs: object) -> Iterator[C]:
        """Within the `with` block, the given options take the given values."""
        previous = self.current
        patched = self.replace({**(changes or {}), **kwargs})
        self._namespace["options"] = patched
        try:
            yield patched
        finally:
            self._namespace["options"] = previous

    def list_options(self) -> dict[str, str]:
        """Option name -> one-line help (with its environment variable)."""
        return {name: f"{opt.help} (env {opt.env})" for name, opt in self.declared.items()}

    def values(self) -> dict[str, object]:
        """Option name -> value in effect."""
        return {name: getattr(self.current, name) for name in self.declared}
