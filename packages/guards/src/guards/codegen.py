"""The fast path: a GuardTree generated into one Python function `guard(L, G) -> bool`.

Every constant the function needs is a closure variable (no dict lookups for constants),
every accessor is fetched once into a local, and each check kind has its own code in the
`EMITTERS` table (the same meaning as the interpreter's table in `reasons.py`). The body
runs inside `try/except Exception: return False`, so an accessor that raises fails the guard.

With the native checker available (`guards.native`, option `native`), the tensor checks,
the global-state check and the backend check of a function are not generated as Python:
they are collected into one native `Checker`, and the function ends with one call
`return native(v0, v1, ...)` taking every checked tensor (see `guards/native/plan.py`).
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from guards import config
from guards.checks import (
    AliasCheck,
    BackendMatch,
    Check,
    DictKeysMatch,
    EqualsMatch,
    GlobalStateMatch,
    IdentityBind,
    IdMatch,
    KeyAbsent,
    LengthMatch,
    NotNone,
    RelationCheck,
    SymbolBind,
    TensorMatch,
    TypeMatch,
    dict_keys_match,
)
from guards.dispatch_keys import keyset_equals
from guards.native.plan import NativeBatch
from guards.snapshot import Region, SnapshotSet, plan_regions
from guards.sources import ConstSource, LocalSource
from guards.state import current_backend
from guards.tree import GuardNode, GuardTree

GuardFn = Callable[[dict[str, object], dict[str, object]], bool]

LOG = logging.getLogger("guards")

#: Prefix of size-symbol locals in generated code (keeps them apart from `v0`, `c0`, ...).
SYMBOL_PREFIX = "sym_"


@dataclass(frozen=True, slots=True)
class CompiledGuard:
    """A compiled guard: `fn(L, G) -> bool`, the Python `source` it was generated from, the
    `tree` it came from (for explanations), and optionally `fn_args`, the same check taking
    the locals named by `arg_names` positionally: `fn_args(x, y, G)`."""

    fn: GuardFn
    source: str
    tree: GuardTree
    #: With `compile_guard(tree, arg_names)`: `fn_args(*locals_in_arg_names_order, G)`.
    fn_args: Callable[..., bool] | None = None
    arg_names: tuple[str, ...] = ()
    #: Whether the generated functions call the native checker.
    native: bool = False

    def __call__(self, L: dict[str, object], G: dict[str, object]) -> bool:
        """Run the check (calling `.fn` directly saves one indirection)."""
        return self.fn(L, G)


class Emitter:
    """Collects the generated lines, the closure constants and fresh local names."""

    def __init__(self, native: Any = None) -> None:
        #: The native module, or None for pure Python.
        self.native = native
        #: The native checks of the function being generated (None: pure Python).
        self.batch: NativeBatch | None = None
        #: The name of the source whose checks are being generated (for notes).
        self.subject = ""
        self.lines: list[str] = []
        self.const_names: dict[object, str] = {}
        self.const_values: list[object] = []
        self.const_order: list[str] = []
        self._pending: list[str] = []
        self._locals = 0
        #: Identity slot -> the local variable holding its object (see IdentityBind).
        self.identities: dict[str, str] = {}
        #: ids of the region roots of the function being generated (`guards.snapshot`): only
        #: their pinning check is generated; the snapshot named `snapshot_check` covers them.
        self.regions: set[int] = set()
        self.snapshot_check: str | None = None

    def const(self, value: object, hint: str = "c") -> str:
        """The closure variable holding `value` (one per distinct object; tuples of ints,
        such as shapes and strides, are shared by value)."""
        key: object = id(value)
        if type(value) is tuple and all(type(item) is int for item in value):
            key = value
        name = self.const_names.get(key)
        if name is None:
            name = f"{hint}{len(self.const_values)}"
            self.const_names[key] = name
            self.const_values.append(value)
            self.const_order.append(name)
        return name

    def const_keyed(self, key: object, make: Callable[[], object], hint: str = "c") -> str:
        """The closure variable for the value `make()` builds, shared by every use of `key`."""
        name = self.const_names.get(key)
        if name is None:
            name = f"{hint}{len(self.const_values)}"
            self.const_names[key] = name
            self.const_values.append(make())
            self.const_order.append(name)
        return name

    def fresh(self, hint: str = "v") -> str:
        """A new local variable name."""
        name = f"{hint}{self._locals}"
        self._locals += 1
        return name

    def require(self, condition: str) -> None:
        """Emit: fail unless `condition` holds.

        Consecutive requirements share one `if not (a and b and ...): return False` (same
        order, same short-circuit), which saves a jump and a test per check.
        """
        self._pending.append(condition)

    def emit(self, line: str) -> None:
        """Emit one statement (after the pending requirements)."""
        self.flush()
        self.lines.append(line)

    def flush(self) -> None:
        """Write out the pending requirements as one `if`."""
        if not self._pending:
            return
        if len(self._pending) == 1:
            self.lines.append(f"if not ({self._pending[0]}):")
        else:
            self.lines.append("if not (")
            self.lines.extend(f"    ({condition}) and" for condition in self._pending[:-1])
            self.lines.append(f"    ({self._pending[-1]})")
            self.lines.append("):")
        self.lines.append("    return False")
        self._pending.clear()


CheckEmitter = Callable[[Any, str, Emitter], None]
EMITTERS: dict[type[Check], CheckEmitter] = {}


def _emits(kind: type[Check]) -> Callable[[CheckEmitter], CheckEmitter]:
    def register(fn: CheckEmitter) -> CheckEmitter:
        EMITTERS[kind] = fn
        return fn

    return register


@_emits(TypeMatch)
def _type(check: TypeMatch, var: str, out: Emitter) -> None:
    out.require(f"type({var}) is {out.const(check.cls, 'cls')}")


@_emits(IdMatch)
def _id(check: IdMatch, var: str, out: Emitter) -> None:
    if check.holds_object():
        # NOTE: `is` on a closure constant is cheaper than calling id().
        out.require(f"{var} is {out.const(check.obj, 'obj')}")
    elif check.target_id == id(None):
        out.require(f"{var} is None")  # NOTE: IdMatch.of(None) cannot hold its object
    else:
        out.require(f"id({var}) == {check.target_id}")


@_emits(KeyAbsent)
def _key_absent(check: KeyAbsent, var: str, out: Emitter) -> None:
    key = check.key
    literal = repr(key) if key is None or type(key) in (int, str, bool) else out.const(key)
    out.require(f"{literal} not in {var}")


@_emits(IdentityBind)
def _identity_bind(check: IdentityBind, var: str, out: Emitter) -> None:
    out.identities[check.slot] = var  # NOTE: no code: the accessor's local is the object


#: Up to this many distinct objects are compared pairwise with `is not`; more go through a
#: set of ids.
_PAIRWISE_LIMIT = 4


@_emits(AliasCheck)
def _aliasing(check: AliasCheck, var: str, out: Emitter) -> None:
    names = out.identities
    for group in check.groups:
        head = names[group[0]]
        for slot in group[1:]:
            out.require(f"{names[slot]} is {head}")
    heads = [names[group[0]] for group in check.groups]
    if len(heads) <= _PAIRWISE_LIMIT:
        for i, first in enumerate(heads):
            for second in heads[i + 1:]:
                out.require(f"{first} is not {second}")
    else:
        ids = ", ".join(f"id({head})" for head in heads)
        out.require(f"len({{{ids}}}) == {len(heads)}")


def constant_condition(expr: str, value: object, out: Emitter) -> str:
    """A Python condition equivalent to `checks.constant_matches(<expr>, value)`."""
    if value is None or type(value) is bool:
        return f"{expr} is {value!r}"
    if type(value) is float:
        if math.isnan(value):
            return f"(type({expr}) is float and {expr} != {expr})"
        if value == 0.0:  # 0.0 == -0.0: the sign tells them apart
            sign = out.const(math.copysign, "copysign")
            return (f"(type({expr}) is float and {expr} == 0.0 and "
                    f"{sign}(1.0, {expr}) == {math.copysign(1.0, value)!r})")
        literal = repr(value) if math.isfinite(value) else out.const(value)
        return f"(type({expr}) is float and {expr} == {literal})"
    if type(value) in (int, str):
        return f"(type({expr}) is {type(value).__name__} and {expr} == {value!r})"
    if type(value) is tuple:
        parts = [f"type({expr}) is tuple", f"len({expr}) == {len(value)}"]
        parts += [constant_condition(f"{expr}[{i}]", item, out) for i, item in enumerate(value)]
        return "(" + " and ".join(parts) + ")"
    if isinstance(value, enum.Enum) or type(value).__name__ == "dtype":
        return f"{expr} is {out.const(value)}"
    return f"(type({expr}) is {out.const(type(value), 'cls')} and {expr} == {out.const(value)})"


@_emits(EqualsMatch)
def _equals(check: EqualsMatch, var: str, out: Emitter) -> None:
    out.require(constant_condition(var, check.value, out))


@_emits(LengthMatch)
def _length(check: LengthMatch, var: str, out: Emitter) -> None:
    out.require(f"len({var}) == {check.length}")


@_emits(DictKeysMatch)
def _dict_keys(check: DictKeysMatch, var: str, out: Emitter) -> None:
    if check.by_identity:
        out.require(f"{out.const(dict_keys_match, 'dict_keys_match')}({var}, "
                    f"{out.const(check.keys, 'keys')})")
        return
    out.require(f"tuple({var}.keys()) == {out.const(check.keys, 'keys')}")


@_emits(NotNone)
def _not_none(check: NotNone, var: str, out: Emitter) -> None:
    out.require(f"{var} is not None")


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    running = 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))


def _device_condition(var: str, device: Any, out: Emitter) -> str:
    # NOTE: `t.is_cpu` is ~2x cheaper than building `t.device` and comparing it.
    if device.type == "cpu":
        return f"{var}.is_cpu"
    if device.type == "cuda" and device.index is not None:
        return f"{var}.is_cuda and {var}.get_device() == {device.index}"
    return f"{var}.device == {out.const(device, 'device')}"


def _stride_conditions(check: TensorMatch, var: str, sizes: str, out: Emitter) -> list[str]:
    """Conditions equivalent to `reasons.stride_mismatch(...) is None`; `sizes` names the
    tensor's shape (a local in the dynamic case)."""
    shape = check.shape
    strides = check.strides
    if any(size is None for size in shape):
        # NOTE: which sizes are 0 or 1 is known only at run time here; see `stride_mismatch`.
        checked = [i for i, stride in enumerate(strides) if stride is not None]
        if not checked:
            return []
        per_dim = " and ".join(
            f"({sizes}[{i}] == 1 or {var}.stride({i}) == {strides[i]})"
            if shape[i] is None else f"{var}.stride({i}) == {strides[i]}"
            for i in checked if shape[i] != 1)
        return [f"(0 in {sizes} or ({per_dim or 'True'}))"]
    static = tuple(s for s in shape if s is not None)
    if 0 in static:
        return []  # no elements: strides never address memory
    matter = [i for i, size in enumerate(static) if size != 1 and strides[i] is not None]
    if not matter:
        return []
    contiguous = _contiguous_strides(static)
    every = [i for i, size in enumerate(static) if size != 1]
    if matter == every and all(strides[i] == contiguous[i] for i in every):
        return [f"{var}.is_contiguous()"]
    if len(matter) == len(static):
        return [f"{var}.stride() == {out.const(strides, 'strides')}"]
    return [f"{var}.stride()[{i}] == {strides[i]}" for i in matter]


@_emits(TensorMatch)
def _tensor(check: TensorMatch, var: str, out: Emitter) -> None:
    if out.batch is not None and out.batch.take_tensor(check, var, out.subject):
        return
    sizes = f"{var}.shape"
    if any(size is None for size in check.shape):
        # NOTE: read the shape once; if `var` is not a tensor this raises or the type
        # check below fails, a failed guard either way.
        sizes = out.fresh("sizes")
        out.emit(f"{sizes} = {var}.shape")
    conditions = [
        f"type({var}) is {out.const(check.cls, 'cls')}",
        f"{var}.dtype is {out.const(check.dtype, 'dtype')}",
        _device_condition(var, check.device, out),
        f"{var}.requires_grad is {check.requires_grad!r}",
    ]
    if check.dispatch_keys is None:
        # NOTE: with dispatch keys checked, the key set fixes the layout (Sparse, SparseCsr,
        # Mkldnn, Nested are keys); without them it must be read: a sparse COO or mkldnn
        # tensor can have the right shape and pass `is_contiguous()`.
        conditions.append(f"{var}.layout is {out.const(check.expected_layout(), 'layout')}")
    if all(size is not None for size in check.shape):
        conditions.append(f"{var}.shape == {out.const(tuple(check.shape), 'shape')}")
    else:
        conditions.append(f"len({sizes}) == {len(check.shape)}")
        conditions += [f"{sizes}[{i}] == {size}"
                       for i, size in enumerate(check.shape) if size is not None]
    if check.placement is None:
        conditions += _stride_conditions(check, var, sizes, out)
    else:
        offset, leaf = check.placement
        conditions += [f"{var}.stride() == {out.const(check.strides, 'strides')}",
                       f"{var}.storage_offset() == {offset}", f"{var}.is_leaf is {leaf!r}"]
    expected_keys = check.dispatch_keys
    if expected_keys is not None:
        import torch

        # NOTE: read every time: a live tensor's key set can change (see dispatch_keys.py).
        keys_of = out.const(torch._C._dispatch_keys, "keys_of")
        equals = out.const_keyed(("keys", expected_keys),
                                 lambda: keyset_equals(expected_keys), "keys_eq")
        conditions.append(f"{equals}({keys_of}({var}))")
    out.require(" and ".join(conditions))


@_emits(GlobalStateMatch)
def _global_state(check: GlobalStateMatch, var: str, out: Emitter) -> None:
    if out.batch is not None and out.batch.take_state(check):
        return
    import torch

    if check.grad_enabled is not None:
        out.require(f"{out.const(torch._C.is_grad_enabled, 'grad_enabled')}() "
                    f"is {check.grad_enabled!r}")
    if check.default_dtype is not None:
        out.require(f"{out.const(torch.get_default_dtype, 'default_dtype')}() "
                    f"is {out.const(check.default_dtype, 'dtype')}")
    if check.deterministic is not None:
        getter = out.const(torch._C._get_deterministic_algorithms, "deterministic")
        out.require(f"{getter}() is {check.deterministic!r}")
    if check.autocast is not None:
        enabled = out.const(torch.is_autocast_enabled, "autocast_enabled")
        dtype_of = out.const(torch.get_autocast_dtype, "autocast_dtype")
        parts = []
        for device, on, dtype in check.autocast:
            part = f"{enabled}({device!r}) is {on!r}"
            if on:
                part += f" and {dtype_of}({device!r}) is {out.const(dtype, 'dtype')}"
            parts.append(part)
        exact = " and ".join(parts) or "True"
        if not any(on for _, on, _ in check.autocast):
            # NOTE: fast path for the common case: no autocast anywhere.
            any_on = out.const(torch._C._is_any_autocast_enabled, "any_autocast")
            out.require(f"{any_on}() is False or ({exact})")
        else:
            out.require(exact)


@_emits(BackendMatch)
def _backend(check: BackendMatch, var: str, out: Emitter) -> None:
    if out.batch is not None and out.batch.take_backend(check):
        return
    active = f"{out.const(current_backend, 'current_backend')}()"
    if check.backend is not None and id(check.backend) == check.backend_id:
        out.require(f"{active} is {out.const(check.backend, 'backend')}")
    else:
        out.require(f"id({active}) == {check.backend_id}")


@_emits(SymbolBind)
def _bind(check: SymbolBind, var: str, out: Emitter) -> None:
    symbol = SYMBOL_PREFIX + check.symbol
    out.emit(f"{symbol} = {var}")
    out.require(f"type({symbol}) is int")


@_emits(RelationCheck)
def _relation(check: RelationCheck, var: str, out: Emitter) -> None:
    out.require(check.relation.render(SYMBOL_PREFIX))


#: Checks whose generated condition reads the checked value exactly once and emits no
#: statement: a leaf accessor with only these is read inside the condition itself.
_READ_ONCE = (TypeMatch, IdMatch, LengthMatch, KeyAbsent, DictKeysMatch, NotNone)


def _inlinable(node: GuardNode) -> bool:
    """A leaf accessor with one check that reads its value once: `len(v0._hooks) == 0` needs
    no local variable (and joins the surrounding requirements in one `if`)."""
    return (not node.children and len(node.checks) == 1
            and type(node.checks[0]) in _READ_ONCE)


def _emit_node(node: GuardNode, base: str, out: Emitter,
               args: dict[str, str] | None = None) -> None:
    source = node.source
    if (args is None or not isinstance(source, LocalSource)) and not isinstance(
            source, ConstSource) and _inlinable(node):
        out.subject = source.name()
        check = node.checks[0]
        EMITTERS[type(check)](check, f"({source.code(base, out.const)})", out)
        return
    if id(node) in out.regions:
        var = out.fresh()
        out.emit(f"{var} = {source.code(base, out.const)}  # {source.name()}")
        out.subject = source.name()
        pin = next(c for c in node.checks if type(c) is IdMatch and c.holds_object())
        _id(pin, var, out)  # NOTE: the rest of the subtree is the snapshot's
        return
    if args is not None and isinstance(source, LocalSource):
        if source.local not in args:
            out.require("False")  # NOTE: an absent local, as a KeyError on L would be
            return
        var = args[source.local]  # NOTE: a parameter of the positional variant
    elif isinstance(source, ConstSource):
        var = out.const(source.obj, "obj")  # NOTE: the object itself, no read needed
    else:
        var = out.fresh()
        out.emit(f"{var} = {source.code(base, out.const)}  # {source.name()}")
    out.subject = source.name()
    for check in node.checks:
        EMITTERS[type(check)](check, var, out)
    for child in node.children:
        _emit_node(child, var, out)


def _body(tree: GuardTree, out: Emitter, args: dict[str, str] | None) -> list[str]:
    out.lines = []
    out.batch = None if out.native is None else NativeBatch(out.native)
    out.subject = ""
    out.identities = {}
    for check in tree.root_checks:
        EMITTERS[type(check)](check, "None", out)
    for node in tree.children:
        _emit_node(node, "L", out, args)
    batch, out.batch = out.batch, None
    if out.snapshot_check is not None:
        out.flush()
        out.lines.append(f"if not {out.snapshot_check}():")
        out.lines.append("    return refresh(L, G)  # the full guard, which re-arms")
    if batch is None or batch.empty():
        out.emit("return True")
        return out.lines
    # NOTE: the native checks come last, in one call (see guards/native/plan.py); a
    # Checker.check returns True or False itself.
    checker = out.const(batch.checker().check, "native")
    out.flush()
    out.lines.extend(f"# native: {note}" for note in batch.notes)
    out.lines.append(f"return {checker}({', '.join(batch.args)})")
    return out.lines


def _function(header: str, lines: list[str]) -> str:
    body = "\n".join("            " + line for line in lines)
    return (f"    def {header}:\n"
            f"        try:\n"
            f"{body}\n"
            f"        except Exception:\n"
            f"            return False\n")


def generate(tree: GuardTree, arg_names: Sequence[str] | None = None, native: Any = None
             ) -> tuple[str, list[object], list[str]]:
    """The source of `make(<constants>)`, the constant values and their names.

    `make` returns `guard(L, G)`, or with `arg_names` the pair `(guard, guard_args)` where
    `guard_args(a0, a1, ..., G)` takes the local `arg_names[i]` as its i-th argument and
    treats any other local as absent: `guard_args(*values, G) == guard(dict(zip(arg_names,
    values)), G)`. With `native` (the module `guards.native.load_native()` returns), tensor,
    global-state and backend checks go to one native Checker per function.
    """
    out = Emitter(native)
    regions, snapshot = _snapshot(tree, native)
    if snapshot is not None:
        # NOTE: `guard` checks the regions with one snapshot call and falls back to
        # `refresh`, which arms the snapshot and runs `guard_full`, today's whole guard.
        functions = _function("guard_full(L, G)", _body(tree, out, None))
        functions += (f"    refresh = {out.const(SnapshotSet, 'snapshot_set')}("
                      f"{out.const(snapshot, 'snapshot')}, guard_full).refresh\n")
        out.regions = {id(region.node) for region in regions}
        out.snapshot_check = out.const(snapshot.check, "snapshot_check")
        functions += _function("guard(L, G)", _body(tree, out, None))
        out.regions, out.snapshot_check = set(), None
    else:
        functions = _function("guard(L, G)", _body(tree, out, None))
    result = "guard"
    if arg_names is not None:
        params = {name: f"a{i}" for i, name in enumerate(arg_names)}
        header = f"guard_args({''.join(p + ', ' for p in params.values())}G)"
        functions += _function(header, _body(tree, out, params))
        result = "guard, guard_args"
    names = out.const_order
    source = f"def make({', '.join(names)}):\n{functions}    return {result}\n"
    return source, out.const_values, names


def _snapshot(tree: GuardTree, native: Any) -> tuple[list[Region], Any]:
    """The snapshot regions of `tree` and their native Snapshot, or ([], None)."""
    if native is None:
        return [], None
    try:
        regions, specs = plan_regions(tree, native)
        if not regions:
            return [], None
        return regions, native.Snapshot([region.spec() for region in regions], specs)
    except Exception as exc:  # noqa: BLE001  # peeking at odd objects: no snapshot, same guard
        LOG.debug("guards: no snapshot for this guard (%s)", exc)
        return [], None


def _needs_torch(tree: GuardTree) -> bool:
    """Whether the tree holds a check that needs torch (only then may native be used)."""
    if any(isinstance(check, GlobalStateMatch) for check in tree.root_checks):
        return True

    def visit(node: GuardNode) -> bool:
        return (any(isinstance(check, TensorMatch) for check in node.checks)
                or any(visit(child) for child in node.children))

    return any(visit(node) for node in tree.children)


def _native_module(tree: GuardTree, native: bool | None) -> Any:
    """The native module to generate against, or None (see `compile_guard`)."""
    if native is False or (native is None and not config.options.native):
        return None
    if not _needs_torch(tree):
        return None  # NOTE: keeps guards without tensors free of torch and of the build
    from guards.native import load_native

    return load_native()


def compile_guard(tree: GuardTree, arg_names: Sequence[str] | None = None, *,
                  native: bool | None = None) -> CompiledGuard:
    """Generate and compile the fast check for `tree`.

    With `arg_names` (for example a function's parameter names), the result also has
    `fn_args(v0, v1, ..., G)`, the same check taking the locals positionally, so that a
    caller need not build the dict L: `fn_args(*values, G) == fn(dict(zip(arg_names,
    values)), G)` (a local the tree reads that is not named is absent: the guard fails).

    `native`: None follows the option `native` (env `GUARDS_NATIVE`), True uses the native
    checker when it is available, False never does. It is only used for trees with tensor
    or global-state checks; `CompiledGuard.native` says whether it was. Without a cached
    build, the checker is built in the background (see `guards.native`): guards compiled
    meanwhile are pure Python, and stay so; option `native=2` waits for the build instead.
    """
    module = _native_module(tree, native)
    try:
        source, values, names = generate(tree, arg_names, module)
    except (TypeError, ValueError, OverflowError) as exc:
        if module is None:
            raise
        # NOTE: a spec the native Checker rejects (an unusual dtype or device object):
        # the same guard in pure Python.
        LOG.debug("guards: native checker rejected a spec (%s); generating pure Python", exc)
        module = None
        source, values, names = generate(tree, arg_names, None)
    namespace: dict[str, Any] = {}
    exec(compile(source, "<guard>", "exec"), namespace)  # noqa: S102  # our own generated code
    made = namespace["make"](*values)
    used = any(name.startswith("native") for name in names)
    if arg_names is None:
        return CompiledGuard(made, source, tree, native=used)
    fn, fn_args = made
    return CompiledGuard(fn, source, tree, fn_args, tuple(arg_names), native=used)
