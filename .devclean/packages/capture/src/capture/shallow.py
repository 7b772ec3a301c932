"""`disable(fn, recursive=False)` called from compiled code: `fn`'s own frame runs eagerly,
the functions and modules it calls are compiled.

Capture intercepts frames in pure Python, so an eager frame's callees would run eagerly too.
`shallow_call(fn, compile_callee)` instead runs a copy of `fn` whose code passes each callee
through `callee_for` before the call: a user function (one capture would inline) becomes its
compiled wrapper (`compile_callee`, the calling frame's backend and options), a bound method
of one a bound compiled wrapper, a module without hooks its compiled `forward`; anything else
is called as it is. The callees rewritten are the ones Python loads for a call: globals and
builtins (`f(x)`), methods and attributes (`self.block(x)`, `obj.method(x)`). A callee
computed otherwise (a local variable, a subscript) runs eagerly.

Called from eager code (not from a compiled frame), `fn` simply runs: nothing is compiled
there, as with torch.compile.
"""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Callable
from typing import Any

import torch
from bytecode import Bytecode, Instr

from capture import policy
from capture.bytecode import versions

__all__ = ["callee_for", "compiled_module_call", "rewrite_calls", "shallow_call"]

CompileCallee = Callable[[types.FunctionType], Any]


def callee_for(obj: object, compile_callee: CompileCallee) -> object:
    """What a shallow frame calls instead of `obj` (its compiled form, or `obj` itself)."""
    if isinstance(obj, types.FunctionType):
        if policy.is_disabled(obj.__code__) or policy.decide(obj) is not policy.Decision.INLINE:
            return obj
        return compile_callee(obj)
    if isinstance(obj, types.MethodType) and isinstance(obj.__func__, types.FunctionType):
        compiled = callee_for(obj.__func__, compile_callee)
        if compiled is obj.__func__ or not callable(compiled):
            return obj
        return types.MethodType(compiled, obj.__self__)
    if isinstance(obj, torch.nn.Module):
        # NOTE: torch's own layers (nn.Linear...) run as they are, as torch.compile leaves
        # them in a skipped frame; a user module's forward is compiled.
        if policy.module_of(type(obj)).split(".")[0] == "torch":
            return obj
        compiled = compiled_module_call(obj, compile_callee)
        return obj if compiled is None else compiled
    return obj


def compiled_module_call(
    module: torch.nn.Module, compile_callee: Callable[[types.FunctionType], Any]
) -> Any:
    """`module(...)` as its compiled `forward`, when no hook would run around it (None
    otherwise)."""
    from torch.nn.modules import module as nn_module

    hook_tables = (
        module._forward_hooks, module._forward_pre_hooks, module._backward_hooks,
        module._backward_pre_hooks, nn_module._global_forward_hooks,
        nn_module._global_forward_pre_hooks, nn_module._global_backward_hooks,
        nn_module._global_backward_pre_hooks,
    )
    forward = getattr(type(module), "forward", None)
    if any(hook_tables) or "forward" in module.__dict__ or not isinstance(
        forward, types.FunctionType
    ):
        return None
    return types.MethodType(compile_callee(forward), module)


def _wrap_top(wrapper: object, lineno: int | None) -> list[Instr]:
    """Instructions replacing the top of the stack `v` by `wrapper(v)`."""
    if versions.null_after_callable():  # 3.13+: callable, NULL, args
        out = [Instr("LOAD_CONST", wrapper), Instr("SWAP", 2), *versions.push_null(),
               Instr("SWAP", 2), *versions.call(1)]
    else:  # 3.11/3.12: NULL, callable, args
        out = [*versions.push_null(), Instr("SWAP", 2), Instr("LOAD_CONST", wrapper),
               Instr("SWAP", 2), *versions.call(1)]
    for instr in out:
        instr.lineno = lineno
    return out


def _null_below_top(lineno: int | None) -> list[Instr]:
    """Push the NULL of a plain call where the calling convention wants it, the callable
    being on top of the stack."""
    out = list(versions.push_null())
    if not versions.null_after_callable():
        out.append(Instr("SWAP", 2))
    for instr in out:
        instr.lineno = lineno
    return out


def rewrite_calls(code: types.CodeType, wrapper: Callable[[object], object]) -> types.CodeType:
    """`code` with the callee of each global, method or attribute call passed through
    `wrapper` (a one-argument callable held as a constant)."""
    bc = Bytecode.from_code(code)
    out: list[Any] = []
    for item in bc:
        if not isinstance(item, Instr):
            out.append(item)
            continue
        line = item.lineno
        if item.name == "LOAD_GLOBAL" and isinstance(item.arg, tuple) and item.arg[0]:
            name = item.arg[1]
            if versions.null_after_callable():
                out.append(Instr("LOAD_GLOBAL", (False, name), lineno=line))
                out.extend(_wrap_top(wrapper, line))
                out.extend(_null_below_top(line))
            else:
                out.append(item)  # NULL, global
                out.extend(_wrap_top(wrapper, line))
            continue
        arg: Any = item.arg
        method_attr = item.name == "LOAD_ATTR" and isinstance(arg, tuple) and arg[0]
        if item.name == "LOAD_METHOD" or method_attr:
            name = arg[1] if method_attr else arg
            plain = (False, name) if isinstance(arg, tuple) else name
            out.append(Instr("LOAD_ATTR", plain, lineno=line))
            out.extend(_wrap_top(wrapper, line))
            out.extend(_null_below_top(line))
            continue
        out.append(item)
    bc.clear()
    bc.extend(out)
    return bc.to_code()


_active = threading.local()
_rewritten: dict[types.CodeType, types.CodeType] = {}


def _callee_now(obj: object) -> object:
    """`callee_for` with the compile function of the shallow call running in this thread."""
    compile_callee: CompileCallee | None = getattr(_active, "compile_callee", None)
    return obj if compile_callee is None else callee_for(obj, compile_callee)


def shallow_call(fn: types.FunctionType, compile_callee: CompileCallee) -> Callable[..., Any]:
    """`fn` with its callees compiled by `compile_callee` (the compiled frame's, which calls
    `fn` at a graph break) while it runs.

    NOTE: a generator function's body runs after the call returns: its callees run eagerly.
    """
    code = _rewritten.get(fn.__code__)
    if code is None:
        code = _rewritten[fn.__code__] = rewrite_calls(fn.__code__, _callee_now)
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        saved = getattr(_active, "compile_callee", None)
        _active.compile_callee = compile_callee
        try:
            return copy(*args, **kwargs)
        finally:
            _active.compile_callee = saved

    return run
