"""The interpreter's entry points that many modules need and few define: calling a value,
reading and writing attributes, iterating. Lower modules (operators, the builtins table,
attributes) call them through this module; the modules that define them (`calls`,
`attributes`, `builtins_table`) install them here when imported, which `load_handlers`
guarantees before any trace. So imports go one way: every module may import `dispatch`,
`dispatch` imports no module of the interpreter.

`tools/import_cycles.py packages/capture/src/capture --fail` checks that no cycle is back, in
the interpreter or in the whole package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capture.interp.translator import Translator
    from capture.values import IteratorValue, Value

__all__ = ["AttrMissing", "call_value", "get_attr", "guard_missing_attr", "iterate",
           "store_attr"]


class AttrMissing(Exception):
    """The attribute does not exist (what AttributeError would be in eager)."""


def _not_loaded(name: str) -> Callable[..., Any]:
    def missing(*args: object, **kwargs: object) -> Any:
        raise RuntimeError(f"capture.interp: {name} is used before its module was loaded "
                           "(call capture.interp.load_handlers() first)")

    return missing


#: `fn(*args, **kwargs)` on values (capture.interp.calls).
call_value: Callable[[Translator, Value, list[Value], dict[str, Value]], Value] = (
    _not_loaded("call_value"))
#: `value.name`; raises AttrMissing (capture.interp.attributes).
get_attr: Callable[[Translator, Value, str], Value] = _not_loaded("get_attr")
#: `owner.name = value` (capture.interp.attributes).
store_attr: Callable[[Translator, Value, str, Value], None] = _not_loaded("store_attr")
#: Guards that keep an attribute found missing missing (capture.interp.attributes).
guard_missing_attr: Callable[[Translator, Value], None] = _not_loaded("guard_missing_attr")
#: `iter(value)` with its items known now (capture.interp.builtins_table).
iterate: Callable[[Translator, Value], IteratorValue] = _not_loaded("iterate")
