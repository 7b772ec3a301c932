"""Graph breaks with resume functions.

In: a root frame whose trace stopped at an instruction capture cannot put in a graph (a
call of an unsupported callable, a branch on a tensor's value), with the stack and locals
the translator holds there. Out: the tail of the transformed code: it rebuilds the stack
and locals, replays pending side effects, runs that one instruction for real, and returns
what a resume function returns when called with the resulting stack and the live locals.
A resume function is the original code entered at the next instruction (one per branch
target for a jump); it is compiled on its first call like any other frame.

Breaks are taken only in the root frame, at calls and conditional jumps; anywhere else the
frame runs eagerly as a whole. Inside `except` handlers the handled exception is made again
for real (`contexts.fresh_exception`, one per call), is `sys.exc_info()` for the instruction
run for real, and the resume function's prologue enters the handlers again (PUSH_EXC_INFO),
so their POP_EXCEPT restores the caller's state; a `finally` body entered by an exception
cannot be resumed (`bytecode` cannot size the resume function) and runs the frame eagerly. Inside a `for` loop
the iterator travels to the resume function as the tuple of its remaining items (one resume
function per later iteration); inside grad-mode `with` blocks (`no_grad`, `enable_grad`,
`set_grad_enabled`) the graph ends in the frame's entry grad mode, the blocks are entered
again for real (`GradModeExit`) and the resume function gets their exits on its stack, as the
original code expects. Inside `torch.autocast` blocks the graph leaves the blocks, the
instruction runs inside them entered again for real (`contexts.enter_autocast`, left right
after it), and the resume function's prologue enters them again (traced as the blocks'
`with`, so its graph holds the rest of each block). A user context manager's bound
`__exit__` travels like any value; a generator-based one (`contextlib.contextmanager`) left
suspended cannot, and the frame runs eagerly (the reason is logged). Inside `try`/`with`
blocks an exception of the call continues in a resume function entered at the block's
handler (which leaves the re-entered blocks).
"""

from __future__ import annotations

import inspect
import itertools
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from bytecode import Bytecode, Label
from bytecode.instr import Instr, TryBegin, TryEnd
from torch._subclasses.fake_tensor import FakeTensor

from capture.bytecode import codegen, versions
from capture.bytecode.instructions import Instruction, decode, exception_handler
from capture.contexts import LiveIterator, copyable_exception, enter_autocast, fresh_exception
from capture.graph_break import GraphBreakKind, Unsupported
from capture.interp import context_specials
from capture.shallow import compiled_module_call, shallow_call
from capture.values import (
    NULL,
    ConstantValue,
    ContextValue,
    DictIteratorValue,
    FunctionValue,
    IteratorValue,
    LazyIteratorValue,
    MethodValue,
    ModuleValue,
    TensorValue,
    TupleValue,
    Value,
)

if TYPE_CHECKING:
    from capture.interp.translator import Translator

_CALLS = frozenset({"CALL", "CALL_KW", "CALL_FUNCTION_EX"})
_BRANCHES = frozenset({"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE"})
_STACK_ARG = "__capture_stack{}"
_EXC_ARG = "__capture_handled{}"


@dataclass(frozen=True, slots=True)
class BreakPoint:
    """Where the root frame stops: instruction `index`, the `visit`-th time it is reached;
    `in_callee` when what capture could not trace is inside the function called there."""

    index: int
    visit: int
    in_callee: bool = False


def break_point(code: types.CodeType, error: Unsupported) -> BreakPoint | None:
    """Where to break for `error`, or None when the frame must run eagerly as a whole."""
    if error.break_at is None or error.kind is GraphBreakKind.EXCEPTION:
        return None
    index, visit = error.break_at
    opname = decode(code)[index].opname
    if opname not in _CALLS and opname not in _BRANCHES:
        return None
    if code.co_cellvars:
        return None
    return BreakPoint(index, visit, opname in _CALLS and len(error.where) > 1)


def _breakable(code: types.CodeType, index: int) -> bool:
    """Whether instruction `index` is in the body of `try` and `with` blocks (or none), not
    in an `except`/`finally` handler (which `_open_handlers` must then account for)."""
    entry = exception_handler(code, index)
    return entry is None or decode(code)[entry.target].opname == "PUSH_EXC_INFO"


class GradModeExit:
    """The `__exit__` of a grad-mode `with` block (`torch.no_grad()`, `enable_grad()`,
    `set_grad_enabled(m)`) re-entered after a graph break: made, it switches the grad mode;
    called, it restores the mode it found."""

    def __init__(self, mode: bool) -> None:
        self.prev = torch.is_grad_enabled()
        torch._C._set_grad_enabled(mode)

    def __call__(self, *exc: object) -> None:
        torch._C._set_grad_enabled(self.prev)


def make_function(code: types.CodeType, f_globals: dict[str, object],
                  defaults: tuple[object, ...]) -> types.FunctionType:
    """A function made by a frame (no closure, no keyword defaults), for a resume function."""
    fn = types.FunctionType(code, f_globals, code.co_name, defaults or None)
    fn.__qualname__ = code.co_qualname
    return fn


def _grad_exit_mode(tx: Translator, value: Value) -> bool | None:
    """For the exit callable of an open grad-mode `with` block, the mode it set."""
    if not _is_context_exit(value):
        return None
    assert isinstance(value, MethodValue) and isinstance(value.self_value, ContextValue)
    ctx = value.self_value
    if ctx.kind in ("autocast", "null"):
        return None
    if ctx.kind != "grad" or not isinstance(value.func, ConstantValue):
        raise Unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                          f"a graph break inside `with` {ctx.describe()}")
    return bool(ctx.args[0])


def _is_context_exit(value: Value) -> bool:
    """Whether `value` is the exit callable BEFORE_WITH pushed for a torch context (not
    another bound method of the context object, such as `enable_grad().clone` that
    `torch.enable_grad()` used as a decorator calls)."""
    return (isinstance(value, MethodValue) and isinstance(value.self_value, ContextValue)
            and isinstance(value.func, ConstantValue)
            and value.func.value is context_specials.context_exit)


def null_exit(*exc: object) -> None:
    """The `__exit__` of a no-op `with` block (`record_function`) open at a graph break."""


def _is_null_exit(value: Value) -> bool:
    return (_is_context_exit(value) and isinstance(value, MethodValue)
            and isinstance(value.self_value, ContextValue) and value.self_value.kind == "null")


def _autocast_block(value: Value) -> ContextValue | None:
    """For the exit callable of an open `torch.autocast` block, its context."""
    if (_is_context_exit(value) and isinstance(value, MethodValue)
            and isinstance(value.self_value, ContextValue)
            and value.self_value.kind == "autocast"):
        return value.self_value
    return None


def _leave_autocast_blocks(tx: Translator, blocks: dict[int, ContextValue]) -> None:
    """The graph leaves the open autocast blocks (innermost first), and so does tracing."""
    from torch.amp import autocast_mode

    for slot in sorted(blocks, reverse=True):
        state: Any = blocks[slot].state  # (the graph's enter node, the real autocast)
        node, real = state
        tx.output.create_node("call_function", autocast_mode._exit_autocast, (node,), {}, None)
        real.__exit__(None, None, None)


def _restore_exception(cg: codegen.CodeBuilder, saved: str | None) -> None:
    """POP_EXCEPT the exception state saved in `saved` (set before the instruction run for
    real inside a handler)."""
    if saved is not None:
        cg.load_fast(saved)
        cg.instrs.append(Instr("POP_EXCEPT"))


def _call_exits(cg: codegen.CodeBuilder, temps: list[str]) -> None:
    """Call each exit callable in `temps` with `(None, None, None)`, in order."""
    for temp in temps:
        if not versions.null_after_callable():
            cg.emit(versions.push_null())
        cg.load_fast(temp)
        if versions.null_after_callable():
            cg.emit(versions.push_null())
        for _ in range(3):
            cg.load_const(None)
        cg.call_function(3)
        cg.instrs.append(Instr("POP_TOP"))


def _open_handlers(tx: Translator) -> dict[int, Value]:
    """The `except`/`finally` handlers open at the break: the stack slot of the exception
    each one's PUSH_EXC_INFO saved -> the exception it handles: one the trace raised (a
    constant, made again for real on each call) or one the frame received (a resume
    function's argument, passed on)."""
    found: dict[int, Value] = {}
    for slot, previous, exc in tx.handled:
        if slot >= len(tx.stack) or tx.stack[slot] is not previous:
            raise Unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                              "a graph break in an exception handler whose stack capture lost")
        if isinstance(exc, ConstantValue) and not (
                isinstance(exc.value, BaseException) and copyable_exception(exc.value)):
            raise Unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                              f"a graph break while handling {exc.describe()} (a chained "
                              "exception or one its class cannot make again from its args)")
        if not isinstance(exc, ConstantValue) and exc.source is None:
            raise Unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                              f"a graph break while handling {exc.describe()}")
        found[slot] = exc
    if not found and not _breakable(tx.code, tx.ip):
        raise Unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                          "a graph break in an exception handler capture did not enter")
    return found


def select_branch(condition: object, if_true: object, if_false: object) -> object:
    """The resume function of the branch `condition` takes (evaluated for real)."""
    return if_true if condition else if_false


def emit_break(
    cg: codegen.CodeBuilder,
    tx: Translator,
    replay: Callable[[], None],
    make_resume: Callable[[types.CodeType], Any],
    compile_callee: Callable[[types.FunctionType], Any] | None = None,
    in_callee: bool = True,
) -> None:
    """Append the code that finishes the frame from the instruction `tx` stopped at.

    With `compile_callee` and `in_callee` (what capture could not trace is inside the
    function called there), a Python function called there runs through the compiled
    wrapper it returns, so its own frame is captured (graph breaks and all). A function
    disabled with `recursive=False` called there runs eagerly with its own callees compiled
    by `compile_callee` (`shallow.shallow_call`)."""
    ins = tx.instructions[tx.ip]
    _check_hooks(tx)
    callee = _callee_slot(tx, ins) if compile_callee is not None else None
    stack_temps: list[str | None] = []
    iter_slots: set[int] = set()
    grad_modes = {slot: _grad_exit_mode(tx, value) for slot, value in enumerate(tx.stack)}
    exit_temps = _leave_grad_blocks(tx, grad_modes)
    autocasts = {slot: ctx for slot, value in enumerate(tx.stack)
                 if (ctx := _autocast_block(value)) is not None}
    _leave_autocast_blocks(tx, autocasts)
    # NOTE: open autocast blocks are entered for real around the instruction run for real
    # (then left again); a resume function's prologue enters them again for the rest.
    autocast_temps = {slot: _new_temp() for slot in autocasts}
    autocast_exits = [autocast_temps[slot] for slot in sorted(autocasts, reverse=True)]
    # NOTE: inside `except`/`finally` handlers: the exceptions they handle are made again
    # (one per call, as eager raises one); the instruction run for real sees the innermost
    # as `sys.exc_info()`, and a resume function's prologue enters the handlers again
    # (PUSH_EXC_INFO) so that their POP_EXCEPT restores what the caller had.
    handled = _open_handlers(tx)
    exc_temps: dict[int, str] = {}  # id of the exception object (or of its value) -> temp
    for exc in handled.values():
        key = id(exc.value) if isinstance(exc, ConstantValue) else id(exc)
        if key in exc_temps:
            continue
        if isinstance(exc, ConstantValue):
            cg.load_callable(fresh_exception)
            cg.load_object(exc.value)
            cg.call_function(1)
            exc_temps[key] = _new_temp(cg)
            cg.store_fast(exc_temps[key])
        else:
            kept = _keep(cg, exc)
            assert kept is not None
            exc_temps[key] = kept

    def handled_value(value: Value) -> str | None:
        if isinstance(value, ConstantValue):
            return exc_temps.get(id(value.value))
        return exc_temps.get(id(value))
    operands = len(tx.stack) - _operand_count(tx, ins)
    for slot, value in enumerate(tx.stack):
        wrapped = _compiled_callee(value, compile_callee, in_callee) if slot == callee else None
        if grad_modes[slot] is not None:
            stack_temps.append(exit_temps[slot])
        elif slot in autocasts:
            stack_temps.append(autocast_temps[slot])
        elif _is_null_exit(value):
            # NOTE: the exit of an open no-op block (`record_function`): a real no-op.
            stack_temps.append(_keep(cg, ConstantValue(null_exit)))
        elif slot in handled:
            stack_temps.append(_keep(cg, ConstantValue(None)))
        elif (exc_temp := handled_value(value)) is not None:
            stack_temps.append(exc_temp)
        elif wrapped is not None:
            cg.load_object(wrapped)
            callee_temp = _new_temp(cg)
            cg.store_fast(callee_temp)
            stack_temps.append(callee_temp)
        elif (live := _live_container(value)) is not None and slot < operands:
            # NOTE: a `for` loop over a live list, dict or deque: a real iterator over it,
            # at the same position, so changes after the break are seen as in eager (a list
            # iterated to its new end, a dict or deque changed raises).
            assert isinstance(value, IteratorValue)
            container, kind = live
            cg.load_callable(LiveIterator)
            cg.reconstruct(container)
            cg.load_const(kind)
            cg.load_const(value.index)
            cg.call_function(3)
            live_temp = _new_temp(cg)
            cg.store_fast(live_temp)
            stack_temps.append(live_temp)
            iter_slots.add(slot)
        elif (remaining := _remaining_items(value)) is not None and slot < operands:
            # NOTE: a `for` loop's iterator: passed on as the tuple of the items it has
            # left; the resume function's prologue turns it back into an iterator.
            stack_temps.append(_keep(cg, TupleValue(remaining)))
            iter_slots.add(slot)
        elif remaining is not None:
            # NOTE: an operand of the instruction run for real (a comprehension's iterator):
            # a real iterator over the items left.
            cg.load_callable(iter)
            cg.reconstruct(TupleValue(remaining))
            cg.call_function(1)
            iter_temp = _new_temp(cg)
            cg.store_fast(iter_temp)
            stack_temps.append(iter_temp)
        else:
            stack_temps.append(_keep(cg, value))
    # NOTE: a resume function's stack and exception arguments are dead once its prologue
    # ran.
    local_temps = {
        name: handled_value(value) or _keep(cg, _not_iterator(value))
        for name, value in tx.locals.items()
        if not name.startswith((_STACK_ARG[:-2], _EXC_ARG[:-2]))
    }
    names = list(local_temps)
    # NOTE: the NULLs of pending calls (`f(g(x))` breaking at g) are not values: the
    # resume function's prologue pushes them again.
    null_slots = {slot for slot, temp in enumerate(stack_temps) if temp is None}

    def resume_at(index: int, nstack: int, below: int) -> Any:
        """The resume function at `index`; its first `below` stack items are the ones below
        the instruction's operands (the others are its results)."""
        slots = frozenset(i for i in iter_slots if i < below)
        nulls = frozenset(i for i in null_slots if i < below)
        entered = {i: (enter_autocast, ctx.args) for i, ctx in autocasts.items() if i < below}
        handlers = [i for i in sorted(handled) if i < below]
        return make_resume(resume_code(tx.code, index, nstack, names, slots, nulls, entered,
                                       handlers))

    def passed_below(temps: list[str | None]) -> list[str | None]:
        """The stack temps passed to a resume function (not NULLs, not the exits or saved
        exceptions its prologue makes)."""
        return [t for j, t in enumerate(temps)
                if t is not None and j not in handled
                and not (j in autocasts and t == autocast_temps[j])]

    def _exc_temp(exc: Value) -> str:
        found = handled_value(exc)
        assert found is not None
        return found

    def exceptions_below(below: int) -> list[str]:
        """The handled exceptions a resume function's prologue enters again, outermost
        first."""
        return [_exc_temp(handled[i]) for i in sorted(handled) if i < below]

    replay()
    for slot, exit_temp in exit_temps.items():
        # NOTE: the open `with` blocks are entered for real again, outermost first.
        cg.load_callable(GradModeExit)
        cg.load_const(grad_modes[slot])
        cg.call_function(1)
        cg.store_fast(exit_temp)
    for slot in sorted(autocasts):
        cg.load_callable(enter_autocast)
        for arg in autocasts[slot].args:
            cg.load_const(arg)
        cg.call_function(len(autocasts[slot].args))
        cg.store_fast(autocast_temps[slot])
    saved_exc: str | None = None
    if handled and ins.opname not in _BRANCHES:
        saved_exc = _new_temp()
        cg.load_fast(_exc_temp(handled[max(handled)]))
        cg.instrs.append(Instr("PUSH_EXC_INFO"))
        cg.instrs.append(Instr("POP_TOP"))
        cg.store_fast(saved_exc)
    for temp in stack_temps:
        _load(cg, temp)
    if ins.opname in _BRANCHES:
        condition = _new_temp(cg)
        cg.store_fast(condition)
        rest = stack_temps[:-1]
        on_next = resume_at(tx.ip + 1, len(rest), len(rest))
        assert ins.target is not None
        on_jump = resume_at(ins.target, len(rest), len(rest))
        if_true, if_false = (
            (on_jump, on_next) if ins.opname == "POP_JUMP_IF_TRUE" else (on_next, on_jump)
        )
        cg.load_callable(select_branch)
        cg.load_fast(condition)
        cg.load_object(if_true)
        cg.load_object(if_false)
        cg.call_function(3)
        chosen = _new_temp(cg)
        cg.store_fast(chosen)
        _call_exits(cg, autocast_exits)
        args = passed_below(rest) + exceptions_below(len(rest))
        _call_temp(cg, chosen, args + list(local_temps.values()))
        return
    entry = exception_handler(tx.code, tx.ip)
    if entry is not None:
        # NOTE: inside `try`/`with` blocks: an exception of the call continues in a resume
        # function entered at the block's handler, with the stack the handler expects.
        handler = Label()
        begin = TryBegin(handler, push_lasti=False)
        cg.instrs.append(begin)  # type: ignore[arg-type]  # bytecode's pseudo-instruction
        popped = _emit_call(cg, tx, ins)
        cg.instrs.append(TryEnd(begin))  # type: ignore[arg-type]
        after = Label()
        cg.instrs.append(Instr("JUMP_FORWARD", after))
        cg.instrs.append(handler)  # type: ignore[arg-type]  # a label
        error = _new_temp(cg)
        cg.store_fast(error)
        _restore_exception(cg, saved_exc)
        _call_exits(cg, autocast_exits)
        below = passed_below(stack_temps[: entry.depth])
        if entry.lasti:
            lasti = _new_temp(cg)
            cg.load_const(ins.offset)
            cg.store_fast(lasti)
            below.append(lasti)
        nstack = entry.depth + int(entry.lasti) + 1
        on_error = _new_temp(cg)
        cg.load_object(resume_at(entry.target, nstack, entry.depth))
        cg.store_fast(on_error)
        _call_temp(cg, on_error, [*below, error, *exceptions_below(entry.depth),
                                  *local_temps.values()])
        cg.instrs.append(after)  # type: ignore[arg-type]
    else:
        popped = _emit_call(cg, tx, ins)
    depth = len(stack_temps) - popped + 1
    results = [_new_temp(cg) for _ in range(depth)]
    for result in reversed(results):
        cg.store_fast(result)
    _restore_exception(cg, saved_exc)
    _call_exits(cg, autocast_exits)
    resume = resume_at(tx.ip + 1, depth, depth - 1)
    cg.load_callable(resume)
    passed = [r for j, r in enumerate(results)
              if not (j < depth - 1 and (j in null_slots or j in autocasts or j in handled))]
    passed += exceptions_below(depth - 1)
    for temp in [*passed, *local_temps.values()]:
        _load(cg, temp)
    cg.call_function(len(passed) + len(local_temps))
    cg.instrs.append(Instr("RETURN_VALUE"))


_temp_ids = itertools.count()


def _check_hooks(tx: Translator) -> None:
    """A break to call `t.register_hook(fn)` for real: `t`'s whole gradient must reach the
    hook, so the graph before the break may not have used `t` (a backend that compiles the
    graph's backward as one function would pass those parts of the gradient past it)."""
    for value in tx.stack:
        if (
            isinstance(value, MethodValue)
            and isinstance(value.func, ConstantValue)
            and value.func.value is torch.Tensor.register_hook
            and isinstance(value.self_value, TensorValue)
            and value.self_value.node.users
        ):
            raise Unsupported(
                GraphBreakKind.UNSUPPORTED_CALL,
                "register_hook on a tensor the graph already used",
            )


def _leave_grad_blocks(tx: Translator, grad_modes: dict[int, bool | None]) -> dict[int, str]:
    """The graph ends in the grad mode the frame was entered with (the mode before the
    outermost open grad-mode block); a temp for each open block's re-entered exit."""
    slots = [slot for slot, mode in grad_modes.items() if mode is not None]
    if not slots:
        return {}
    if grad_modes[slots[-1]] is not torch.is_grad_enabled():
        raise Unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                          "a graph break after a grad-mode switch inside a `with` block")
    outer = tx.stack[slots[0]]
    assert isinstance(outer, MethodValue) and isinstance(outer.self_value, ContextValue)
    entry_mode = bool(outer.self_value.state)
    if entry_mode is not torch.is_grad_enabled():
        tx.output.create_node("call_function", torch._C._set_grad_enabled, (entry_mode,), {},
                              None)
    return {slot: _new_temp() for slot in slots}


def _new_temp(cg: codegen.CodeBuilder | None = None) -> str:
    """A local name no other part of the transformed code uses."""
    return f"__capture_break{next(_temp_ids)}"


def _callee_slot(tx: Translator, ins: Instruction) -> int | None:
    """The stack index of the function a call at `ins` calls."""
    if ins.arg is None:
        return None
    if ins.opname == "CALL_FUNCTION_EX":
        below_args = len(tx.stack) - 1 - (ins.arg & 1)
    else:
        below_args = len(tx.stack) - ins.arg - (1 if ins.opname == "CALL_KW" else 0)
    # 3.11/3.12: NULL|function, callable|self, args; 3.13+: callable, self|NULL, args.
    function, second = below_args - 2, below_args - 1
    if function < 0:
        return None
    if versions.null_after_callable():
        return function
    return second if tx.stack[function] is NULL else function


def _compiled_callee(value: Value, compile_callee: Callable[[types.FunctionType], Any] | None,
                     in_callee: bool = True) -> Any:
    """The compiled wrapper to call instead of the user function `value`, if it is one."""
    from capture import policy

    if compile_callee is None:
        return None
    shallow = (getattr(value.value, "__capture_shallow__", None)
               if isinstance(value, ConstantValue) else None)
    if isinstance(shallow, types.FunctionType):
        return shallow_call(shallow, compile_callee)
    if not in_callee:
        return None
    if isinstance(value, ModuleValue):
        return compiled_module_call(value.module, compile_callee)
    if not isinstance(value, ConstantValue):
        return None
    fn = value.value
    if not isinstance(fn, types.FunctionType) or policy.is_disabled(fn.__code__):
        return None
    if policy.decide(fn) is not policy.Decision.INLINE:
        return None
    return compile_callee(fn)


def _keep(cg: codegen.CodeBuilder, value: Value) -> str | None:
    """Rebuild `value` into a fresh local (None for the NULL of a call)."""
    if value is NULL:
        return None
    if isinstance(value, MethodValue) and value.source is None:
        # NOTE: a method loaded for the call (`y.register_hook` of a graph output).
        cg.load_callable(types.MethodType)
        cg.reconstruct(value.func)
        cg.reconstruct(value.self_value)
        cg.call_function(2)
    elif isinstance(value, FunctionValue) and not value.closure and not value.kwdefaults:
        # NOTE: a function made in the frame (`y.register_hook(lambda g: g * 3)`): made
        # again, as eager makes it on every call.
        cg.load_callable(make_function)
        cg.load_object(value.code)
        cg.load_object(value.globals)
        for default in value.defaults:
            cg.reconstruct(default)
        cg.build_tuple(len(value.defaults))
        cg.call_function(3)
    else:
        if isinstance(value, ConstantValue) and _holds_fake(value.value):
            raise Unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                              "a constant holding a traced tensor at a graph break")
        cg.reconstruct(value)
    temp = _new_temp(cg)
    cg.store_fast(temp)
    return temp


def _holds_fake(obj: object) -> bool:
    """Whether `obj` is or holds a fake tensor (a value of the trace, never of the program)."""
    if isinstance(obj, FakeTensor):
        return True
    if isinstance(obj, dict):
        return any(_holds_fake(k) or _holds_fake(v) for k, v in obj.items())
    if isinstance(obj, (tuple, list, set, frozenset)):
        return any(_holds_fake(x) for x in obj)
    return False


def _load(cg: codegen.CodeBuilder, temp: str | None) -> None:
    if temp is None:
        cg.emit(versions.push_null())
    else:
        cg.load_fast(temp)


def _call_temp(cg: codegen.CodeBuilder, fn_temp: str, args: list[str | None]) -> None:
    if not versions.null_after_callable():
        cg.emit(versions.push_null())
    cg.load_fast(fn_temp)
    if versions.null_after_callable():
        cg.emit(versions.push_null())
    for temp in args:
        _load(cg, temp)
    cg.call_function(len(args))
    cg.instrs.append(Instr("RETURN_VALUE"))


def _operand_count(tx: Translator, ins: Instruction) -> int:
    """How many stack items the instruction at the break consumes."""
    if ins.opname in _BRANCHES:
        return 1
    assert ins.arg is not None
    if ins.opname == "CALL_FUNCTION_EX":
        return 3 + (ins.arg & 1)
    if ins.opname == "CALL_KW":
        return ins.arg + 3
    return ins.arg + 2


def _emit_call(cg: codegen.CodeBuilder, tx: Translator, ins: Instruction) -> int:
    """Emit the call instruction `ins` as the original ran it; the stack items it pops."""
    assert ins.arg is not None
    if ins.opname == "CALL_FUNCTION_EX":
        cg.instrs.append(Instr("CALL_FUNCTION_EX", ins.arg))
        return 3 + (ins.arg & 1)
    if ins.opname == "CALL_KW":  # 3.13+: the names tuple is on the stack already
        cg.instrs.append(Instr("CALL_KW", ins.arg))
        return ins.arg + 3
    if tx.kw_names:
        cg.emit(versions.call_kw(ins.arg, tx.kw_names))
    else:
        cg.emit(versions.call(ins.arg))
    return ins.arg + 2


def _live_container(value: Value) -> tuple[Value, str] | None:
    """For an iterator over a live container, the container and what is iterated ("iter",
    or a dict's "keys", "values", "items")."""
    if type(value) is DictIteratorValue:
        return value.dict_value, value.kind
    if type(value) is IteratorValue and value.container is not None:
        return value.container, "iter"
    return None


def _remaining_items(value: Value) -> list[Value] | None:
    """The items an iterator has left, without advancing it (None: not an iterator whose
    items are known: a generator, or not an iterator)."""
    if type(value) in (IteratorValue, DictIteratorValue):
        assert isinstance(value, IteratorValue)
        return value.items[value.index :]
    if isinstance(value, LazyIteratorValue):
        inners = [_remaining_items(inner) for inner in value.inners]
        if any(inner is None for inner in inners) or not inners:
            return None
        rows = list(zip(*[inner for inner in inners if inner is not None]))
        start = value.count
        return [
            TupleValue(([] if start is None else [ConstantValue(start + i)]) + list(row))
            for i, row in enumerate(rows)
        ]
    return None


def _not_iterator(value: Value) -> Value:
    if isinstance(value, IteratorValue):
        raise Unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                          f"a graph break with an iterator in a local ({value.describe()})")
    return value


def resume_code(
    code: types.CodeType,
    index: int,
    nstack: int,
    local_names: list[str],
    iter_slots: frozenset[int] = frozenset(),
    null_slots: frozenset[int] = frozenset(),
    entered: Mapping[int, tuple[Callable[..., Any], tuple[object, ...]]] | None = None,
    handlers: list[int] | None = None,
) -> types.CodeType:
    """`code` entered at instruction `index` with `nstack` stack items and `local_names`
    bound, all passed as positional arguments (stack items first). The stack items at
    `iter_slots` are passed as sequences and entered as iterators (`for` loops); those at
    `null_slots` are the NULLs of pending calls, pushed by the prologue, not passed; those
    in `entered` (slot -> (function, constant arguments)) are made by the prologue calling
    the function (the exit of an autocast block entered again), not passed. The stack items
    at `handlers` are what an open `except`/`finally` handler's PUSH_EXC_INFO saved: the
    prologue enters each handler again with the exception passed after the stack items."""
    entered = entered or {}
    handlers = handlers or []
    instructions = decode(code)
    position = sum(1 for ins in instructions[:index] if ins.raw_opname != "EXTENDED_ARG")
    bc = Bytecode.from_code(code)
    items: list[Any] = list(bc)
    seen = 0
    at = len(items)
    for i, item in enumerate(items):
        if isinstance(item, Instr):
            if seen == position:
                at = i
                break
            seen += 1
    label = Label()
    items.insert(at, label)
    stack_names = [_STACK_ARG.format(i) for i in range(nstack)
                   if i not in null_slots and i not in entered and i not in handlers]
    exc_names = [_EXC_ARG.format(i) for i in handlers]
    entry: list[Any] = versions.prologue(len(code.co_freevars))
    for slot in range(nstack):
        if slot in null_slots:
            entry.extend(versions.push_null())
            continue
        if slot in handlers:
            entry.extend([Instr("LOAD_FAST", _EXC_ARG.format(slot)), Instr("PUSH_EXC_INFO"),
                          Instr("POP_TOP")])
            continue
        if slot in entered:
            function, args = entered[slot]
            if not versions.null_after_callable():
                entry.extend(versions.push_null())
            entry.append(Instr("LOAD_CONST", function))
            if versions.null_after_callable():
                entry.extend(versions.push_null())
            entry.extend(Instr("LOAD_CONST", arg) for arg in args)
            entry.extend(versions.call(len(args)))
            continue
        entry.append(Instr("LOAD_FAST", _STACK_ARG.format(slot)))
        if slot in iter_slots:
            entry.append(Instr("GET_ITER"))
    entry.append(Instr("JUMP_FORWARD", label))
    for instr in entry:
        if isinstance(instr, Instr):
            instr.lineno = code.co_firstlineno
    new = Bytecode(entry + items)
    new.argnames = stack_names + exc_names + local_names
    new.argcount = len(new.argnames)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.freevars = list(bc.freevars)
    new.cellvars = []
    offset = instructions[index].offset
    new.name = f"__resume_at_{offset}_{code.co_name}"
    new.qualname = new.name
    new.filename = bc.filename
    new.first_lineno = bc.first_lineno
    new.flags = bc.flags & ~(
        inspect.CO_VARARGS | inspect.CO_VARKEYWORDS | versions.generator_flags()
    )
    new.docstring = None
    try:
        return new.to_code()
    except RuntimeError as error:
        # NOTE: `bytecode` computes stack depths along the control flow from the prologue;
        # a jump into the body of a handler whose code ends in RERAISE (a `finally` entered
        # by an exception) defeats it: no graph break there (the frame runs eagerly).
        raise Unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                          f"no resume function at offset {offset} of {code.co_name}: "
                          f"{error}") from None
