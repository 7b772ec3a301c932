"""Side effects replayed exactly (issue 11, group 3): class-level counters and containers,
mutable default arguments, another module's list, nested containers, attribute writes on
objects reached through containers, setattr/delattr, closure cells and globals. Each program
runs eagerly and compiled over several calls with state changed between calls; the module
state, the arguments and the results (with their identity) must match after every call, and
a list only appended to must not recompile on every call."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _twin import BACKENDS, twin_run


def _x(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0) + i,)


def _bump_counter(ns: dict[str, Any], i: int) -> None:
    if i == 2:
        ns["K"].count = 10


CLASS_COUNTER = """
class K:
    count = 0

def f(x):
    K.count += 1
    return x * K.count
"""

CLASS_REGISTRY_APPEND = """
class K:
    registry = []

def f(x):
    K.registry.append(x)
    K.registry.append(x * 2)
    return x + 1
"""

CLASS_REGISTRY_READ = """
class K:
    registry = []

def f(x):
    K.registry.append(x.sum())
    return x + len(K.registry)
"""

MUTABLE_DEFAULT = """
def f(x, acc=[]):
    acc.append(x * 2)
    return x - 1
"""

MUTABLE_DEFAULT_READ = """
def f(x, acc=[]):
    acc.append(len(acc))
    return x * acc[-1]
"""

OTHER_MODULE_LIST = """
def f(x):
    othermod.LOG.append(x + 1)
    othermod.record(x * 3)
    return x
"""
OTHERMOD = """
LOG = []

def record(v):
    LOG.append(v)
"""

NESTED = """
STATE = {"hist": [], "n": 0, "inner": {"last": None}}

def f(x):
    STATE["hist"].append(x)
    STATE["n"] += 1
    STATE["inner"]["last"] = x * STATE["n"]
    return STATE["inner"]["last"]
"""

ATTR_THROUGH_CONTAINER = """
class Box:
    def __init__(self):
        self.value = 1.0
        self.n = 0

BOXES = [Box(), Box()]
TABLE = {"b": Box()}

def f(x):
    BOXES[0].value = x.sum()
    BOXES[1].n += 1
    TABLE["b"].n = BOXES[1].n * 2
    return x * BOXES[1].n
"""

SETATTR_DELATTR = """
class Obj:
    pass

O = Obj()
O.b = 5

def f(x):
    setattr(O, "a", x * 2)
    if hasattr(O, "b"):
        delattr(O, "b")
        return x + 1
    return x - 1
"""

CLOSURE_CELL = """
def make():
    n = 0
    seen = []
    def f(x):
        nonlocal n
        n += 1
        seen.append(n)
        return x * n
    return f

f = make()
"""

GLOBAL_COUNTER = """
COUNT = 0
TOTAL = None

def f(x):
    global COUNT, TOTAL
    COUNT += 1
    TOTAL = x * COUNT
    return TOTAL + COUNT
"""

GLOBAL_LOG_APPEND = """
LOG = []

def f(x):
    y = x * 2
    LOG.append(y)
    LOG.append("step")
    return y + 1
"""

GLOBAL_LOG_READ_LAST = """
LOG = []

def f(x):
    LOG.append(x * 2)
    return LOG[-1] + 1
"""

ORDER_TWO_LISTS = """
A = [1, 2, 3]
B = ["a", "b", "c"]

def f(x):
    A.append(B[0])
    B.pop(0)
    B.append(A[0])
    A.pop(0)
    return x + 1
"""

ORDER_CLEAR_APPEND = """
LOG = [0]

def f(x):
    LOG.append(1)
    LOG.clear()
    LOG.append(x)
    LOG.insert(0, "head")
    return x
"""

TENSORS_STORED = """
class Holder:
    pass

H = Holder()
D = {}
L = []

def f(x):
    y = x * 2
    z = y + 1
    D["y"] = y
    H.t = y
    H.z = z
    L.append(y)
    L.append(x)
    return y, z
"""

RETURN_MUTATED_ARG = """
def f(x, lst, d):
    lst.append(x * 2)
    d["k"] = lst
    return lst, d
"""

RETURN_GLOBAL_LIST = """
LOG = []

def f(x):
    LOG.append(x)
    return LOG
"""

READ_AFTER_MUTATION = """
class K:
    vals = [1, 2]

def f(x):
    K.vals.append(3)
    K.vals[0] = 10
    total = sum(K.vals)
    K.scale = total
    return x * K.scale
"""

DICT_SET_GLOBAL = """
CACHE = {}

def f(x, key):
    CACHE[key] = x * 2
    return x + 1
"""

LIST_ITEM_ATTR_AND_DELITEM = """
ITEMS = [1, 2, 3, 4]

def f(x):
    del ITEMS[0]
    ITEMS[-1] = x
    return x * len(ITEMS)
"""

INSTANCE_CLASS_COUNTER = """
class Model:
    calls = 0
    seen = {}

    def step(self, x):
        type(self).calls += 1
        self.__class__.seen[self.calls] = x.sum()
        return x * self.calls

M = Model()

def f(x):
    return M.step(x)
"""

INHERITED_CLASS_COUNTER = """
class Base:
    count = 0

class Child(Base):
    pass

def f(x):
    Child.count += 1
    Base.count += 10
    return x + Child.count + Base.count
"""

HELPER_MUTATES_ITS_MODULE = """
def f(x):
    othermod.bump(x)
    return x * othermod.CFG.n
"""
OTHERMOD_CFG = """
class Cfg:
    n = 0

CFG = Cfg()
CFG.n = 1
SEEN = {}

def bump(v):
    CFG.n += 1
    SEEN[CFG.n] = v
"""

MUTABLE_DEFAULT_DICT = """
def f(x, cache={}, hits=[0]):
    key = x.shape[0]
    if key in cache:
        hits[0] += 1
        return cache[key] + hits[0]
    cache[key] = x * 2
    return cache[key]
"""

CLOSURE_CONTAINER = """
def make():
    log = []
    state = {"n": 0}
    def f(x):
        state["n"] += 1
        log.append((state["n"], x))
        return x * state["n"]
    return f

f = make()
"""

NEW_LIST_STORED_TWICE = """
class Holder:
    pass

H = Holder()
REG = []

def f(x):
    fresh = [x, x * 2]
    H.latest = fresh
    REG.append(fresh)
    fresh.append(x * 3)
    return fresh
"""

ARG_OBJECT_AND_LIST = """
def f(x, box, items):
    box.value = box.value + 1
    items.append(box)
    items[0] = items[-1]
    return x * box.value, items
"""


class Box:
    def __init__(self) -> None:
        self.value = 1


def _args_box(i: int) -> tuple[Any, ...]:
    box = Box()
    box.value = i
    return (torch.arange(3.0), box, ["first"])


def _bump_base(ns: dict[str, Any], i: int) -> None:
    if i == 3:
        ns["Base"].count = 100


def _shapes(i: int) -> tuple[Any, ...]:
    return (torch.ones(2 + i % 2),)

HELPER_ONLY_LIST = """
def f(x):
    othermod.record(x * 3)
    return x + 1
"""

REBIND_THEN_MUTATE_OLD = """
LOG = ["start"]

def f(x):
    global LOG
    old = LOG
    LOG = [x]
    old.append(x * 2)
    LOG.append(len(old))
    return x
"""

MUTATE_WHILE_ITERATING_OWN_LIST = """
ITEMS = [1, 2, 3, 4, 5]

def f(x):
    for v in ITEMS:
        if v % 2:
            ITEMS.remove(v)
    return x + len(ITEMS)
"""

GLOBAL_LIST_IADD = """
LOG = []

def f(x):
    global LOG
    LOG += [x, "step"]
    return x + 1
"""

GLOBAL_SEEN_SET = """
SEEN = {"start"}

def f(x, key):
    SEEN.add(key)
    SEEN.add("always")
    return x + 1
"""

GLOBAL_SET_READ = """
SEEN = {1, 2}

def f(x, key):
    SEEN.add(key)
    if 2 in SEEN:
        SEEN.discard(2)
    return x * len(SEEN)
"""


def _keys(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0), f"k{i % 2}")


def _ints(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0), i)


def _reset_registry(ns: dict[str, Any], i: int) -> None:
    if i == 2:
        ns["K"].registry = []


def _reassign_log(ns: dict[str, Any], i: int) -> None:
    if i == 2:
        ns["LOG"] = ["fresh"]


def _readd_b(ns: dict[str, Any], i: int) -> None:
    if i == 2:
        ns["O"].b = 7


def _set_count(ns: dict[str, Any], i: int) -> None:
    if i == 2:
        ns["COUNT"] = 100


def _other_log(ns: dict[str, Any], i: int) -> None:
    if i == 2:
        ns["othermod"].LOG.append("outside")


def _args_list_dict(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0) + i, [i], {"a": i})


def _args_key(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0) + i, f"k{i % 2}")


# (id, source, args, between, modules, most compiles over 5 calls or None)
CASES: list[Any] = [
    ("class_counter", CLASS_COUNTER, _x, _bump_counter, None, None),
    ("class_registry_append", CLASS_REGISTRY_APPEND, _x, _reset_registry, None, 2),
    ("class_registry_read_len", CLASS_REGISTRY_READ, _x, _reset_registry, None, None),
    ("mutable_default", MUTABLE_DEFAULT, _x, None, None, 2),
    ("mutable_default_read", MUTABLE_DEFAULT_READ, _x, None, None, None),
    ("other_module_list", OTHER_MODULE_LIST, _x, _other_log, {"othermod": OTHERMOD}, 2),
    ("nested_containers", NESTED, _x, None, None, None),
    ("attr_through_container", ATTR_THROUGH_CONTAINER, _x, None, None, None),
    ("setattr_delattr", SETATTR_DELATTR, _x, _readd_b, None, None),
    ("closure_cell", CLOSURE_CELL, _x, None, None, None),
    ("global_counter", GLOBAL_COUNTER, _x, _set_count, None, None),
    ("global_log_append", GLOBAL_LOG_APPEND, _x, _reassign_log, None, 2),
    ("global_log_read_last", GLOBAL_LOG_READ_LAST, _x, _reassign_log, None, 2),
    ("order_two_lists", ORDER_TWO_LISTS, _x, None, None, None),
    ("order_clear_append", ORDER_CLEAR_APPEND, _x, None, None, None),
    ("tensors_stored", TENSORS_STORED, _x, None, None, None),
    ("return_mutated_arg", RETURN_MUTATED_ARG, _args_list_dict, None, None, None),
    ("return_global_list", RETURN_GLOBAL_LIST, _x, _reassign_log, None, None),
    ("read_after_mutation", READ_AFTER_MUTATION, _x, None, None, None),
    ("dict_set_global", DICT_SET_GLOBAL, _args_key, None, None, 3),
    ("list_delitem_setitem", LIST_ITEM_ATTR_AND_DELITEM, _x, None, None, None),
    ("instance_class_counter", INSTANCE_CLASS_COUNTER, _x, None, None, None),
    ("inherited_class_counter", INHERITED_CLASS_COUNTER, _x, _bump_base, None, None),
    ("helper_mutates_its_module", HELPER_MUTATES_ITS_MODULE, _x, None, {"othermod": OTHERMOD_CFG},
     None),
    ("mutable_default_dict", MUTABLE_DEFAULT_DICT, _shapes, None, None, None),
    ("closure_container", CLOSURE_CONTAINER, _x, None, None, None),
    ("new_list_stored_twice", NEW_LIST_STORED_TWICE, _x, None, None, 2),
    ("arg_object_and_list", ARG_OBJECT_AND_LIST, _args_box, None, None, None),
    ("helper_only_list", HELPER_ONLY_LIST, _x, _other_log, {"othermod": OTHERMOD}, 2),
    ("rebind_then_mutate_old", REBIND_THEN_MUTATE_OLD, _x, None, None, None),
    ("mutate_while_iterating_own_list", MUTATE_WHILE_ITERATING_OWN_LIST, _x, None, None, None),
    ("global_list_iadd", GLOBAL_LIST_IADD, _x, _reassign_log, None, 2),
    ("global_seen_set", GLOBAL_SEEN_SET, _keys, None, None, 2),
    ("global_set_read", GLOBAL_SET_READ, _ints, None, None, None),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("src", "args", "between", "modules", "max_compiles"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_side_effect_replayed(src: str, args: Any, between: Any, modules: Any,
                              max_compiles: int | None, backend: str) -> None:
    twin_run(src, args, calls=5, between=between, modules=modules, backend=backend,
             max_compiles=max_compiles)


def test_appended_global_list_compiles_once() -> None:
    """A global log appended on every call is one cache entry, not one per call."""
    result = twin_run(GLOBAL_LOG_APPEND, _x, calls=8)
    assert result.compiles == 1, result.compiles
    assert result.graphs == 1, result.graphs
    assert len(result.compiled_ns["LOG"]) == 16


def test_effect_happens_once_per_call() -> None:
    """Each call appends exactly one entry and bumps the counter by one (no double replay)."""
    result = twin_run(CLASS_COUNTER, _x, calls=6)
    assert result.compiled_ns["K"].count == 6
    result = twin_run(MUTABLE_DEFAULT, _x, calls=6)
    assert len(result.compiled_ns["f"].__defaults__[0]) == 6
