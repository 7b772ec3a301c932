"""Dict keys that are not constants: the parameters keying an optimizer's `state`.

In: a key value. Out: the real object to look up in a dict the trace holds (`DictValue`
items are keyed by real objects): a constant's value, or the real tensor of a tensor read
from the frame (an input). A tensor made in the graph has no real object: not a key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capture.values import TensorValue, Value

if TYPE_CHECKING:
    from capture.interp.translator import Translator


def input_key(tx: Translator, key: Value) -> tuple[bool, object]:
    """(True, the real tensor) for a tensor input of the graph, else (False, None)."""
    if isinstance(key, TensorValue):
        real = tx.output.real_by_value.get(id(key))
        if real is not None:
            return True, real
    return False, None
