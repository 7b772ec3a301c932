"""`compile`, `reset`, `disable` and `is_compiling`: argument checking and delegation to
`capture` (frame capture, guards, the backend registry) and `inductor` (options and modes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar, cast, overload

import capture
import torch

from compiler.backends import Backend
from compiler.options import resolve_options
from compiler.validation import expect, type_name

_P = ParamSpec("_P")
_R = TypeVar("_R")
_M = TypeVar("_M", bound=torch.nn.Module)
_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def compile(
    model: _M,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Backend = "inductor",
    mode: str | None = None,
    options: Mapping[str, object] | None = None,
    disable: bool = False,
) -> _M: ...


@overload
def compile(
    model: Callable[_P, _R],
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Backend = "inductor",
    mode: str | None = None,
    options: Mapping[str, object] | None = None,
    disable: bool = False,
) -> Callable[_P, _R]: ...


@overload
def compile(
    model: None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Backend = "inductor",
    mode: str | None = None,
    options: Mapping[str, object] | None = None,
    disable: bool = False,
) -> Callable[[_F], _F]: ...


def compile(
    model: Callable[..., Any] | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Backend = "inductor",
    mode: str | None = None,
    options: Mapping[str, object] | None = None,
    disable: bool = False,
) -> Any:
    """Compile a function, method or `nn.Module` just in time; usable as a decorator.

    The first call captures the Python bytecode of `model` into an FX graph of torch
    operations, records guards (the assumptions it made about the inputs and the program's
    state) and hands the graph to `backend`. Later calls whose inputs pass the guards reuse
    the compiled code; a call that fails them recompiles.

    Args:
        model: The function, bound method or `torch.nn.Module` to compile (a function written
            in C, such as `torch.sign` or an ATen op, compiles as its call). Omit it to get a
            decorator: `@compiler.compile(fullgraph=True)`.
        fullgraph: If True, any construct that cannot be captured into the graph raises
            `capture.Unsupported` naming it and the user's file and line. If False, such a
            frame runs eagerly instead (the reason is logged).
        dynamic: Shape specialization, as in `torch.compile`. None (default): the first
            compile specializes on the sizes seen; when a call with another size (or
            another value of an int argument) recompiles, exactly that dimension (or int)
            becomes symbolic, so sizes that keep changing compile twice, not once each.
            True: every input size is symbolic from the first compile. False: static
            shapes, a recompile per new size (only `mark_dynamic` dimensions are
            symbolic). Sizes 0 and 1, and parameters and buffers of modules, stay static.
        backend: A registered backend name (see `list_backends()`; default `"inductor"`) or
            a callable `backend(gm, example_inputs) -> compiled callable`.
        mode: A mode name (see `list_mode_options()`): `"default"`, `"reduce-overhead"`,
            `"max-autotune"` or `"max-autotune-no-cudagraphs"`. Only for the inductor
            backend; not together with `options`.
        options: Option values for this compiled function only, by name (see
            `list_options()`; `<package>.<option>` or a unique short name), e.g.
            `{"fusion": False, "cache_size_limit": 16, "suppress_errors": True}`. Capture's
            and guards' options apply to the compiled wrapper; the others (aotgrad's,
            inductor's) are passed to the backend as `backend(gm, example_inputs,
            options=...)`. Not together with `mode`. Training memory, on `aot_eager` and
            `inductor` alike: `activation_memory_budget` (in [0, 1]; 1.0, the default,
            saves what the min-cut partitioner saves, 0.0 recomputes everything
            recomputable from inputs and parameters, b in between saves at most b times
            budget 1.0's bytes, recomputing what is cheapest per byte), `solver` ("dp",
            "greedy", "ilp"), `estimator` ("flops", "profile", "testing") and `pareto_svg`
            (a path: the curve of saved bytes against estimated recompute time, the
            chosen point marked).
        disable: If True, return `model` unchanged (a no-op, for quick A/B runs).

    Returns:
        For a function or method, a callable with the same signature. For a module, a
        wrapper that behaves like the module: attribute access, `parameters()`,
        `state_dict()`, `train()`/`eval()` and `to()` go to the original module, and calling
        it runs the compiled `forward`. Without `model`, a decorator producing one of those.

    Raises:
        TypeError: An argument has the wrong type; the message names the parameter and the
            type received.
        ValueError: `backend` names no registered backend, `mode` is unknown, `options`
            has an unknown key (the message lists the closest valid names), or `options`
            has backend options for a backend that takes none.
        RuntimeError: Both `mode` and `options` are given, or `mode` or inductor options
            are given for a backend other than inductor.

    Examples:
        Compile a function with the eager backend (capture only, no code generation):

        >>> import torch, compiler
        >>> def f(x):
        ...     return torch.sin(x) ** 2 + torch.cos(x) ** 2
        >>> fast = compiler.compile(f, backend="eager")
        >>> fast(torch.zeros(3))
        tensor([1., 1., 1.])

        As a decorator, with arguments:

        >>> @compiler.compile(backend="eager", fullgraph=True)
        ... def g(x, y):
        ...     return (x * y).sum(dim=-1)
        >>> g(torch.ones(2, 3), torch.full((2, 3), 2.0))
        tensor([6., 6.])

        A module: the wrapper forwards to the original.

        >>> lin = torch.nn.Linear(4, 2)
        >>> clin = compiler.compile(lin, backend="eager")
        >>> clin.weight is lin.weight
        True
        >>> clin(torch.zeros(1, 4)).shape
        torch.Size([1, 2])

        Mistakes are reported with the closest valid names:

        >>> compiler.compile(f, backend="eagr")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ValueError: unknown backend 'eagr'. Did you mean 'eager'...
        >>> compiler.compile(f, options={"cache_size_limt": 2})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ValueError: unknown option 'cache_size_limt'. Did you mean ...'cache_size_limit'...

        Options for one compiled function (here: keep at most 2 compiled entries):

        >>> small = compiler.compile(f, backend="eager", options={"cache_size_limit": 2})

    Notes:
        Signature-compatible with `torch.compile`. Compilation is lazy: nothing is captured
        until the first call. `compiler.reset()` forgets every compiled entry. Set
        `compiler.config.patch(verbose=True)` (env `CAPTURE_VERBOSE=1`) to print each
        compiled frame's graph, guards and bytecode.
    """
    _check_flags(fullgraph, dynamic, backend, mode, options, disable)
    if model is None:

        def decorate(target: _F) -> _F:
            compiled = compile(
                target, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                options=options, disable=disable,
            )
            # NOTE: the overloads give Callable[P, R] for a generic _F; the wrapper has _F's
            # call signature (and for modules, its attributes), which is what users rely on.
            return cast(_F, compiled)

        return decorate
    expect(
        "compile", "model", model, "a function, method or torch.nn.Module",
        isinstance(model, torch.nn.Module) or callable(model) and not isinstance(model, type),
    )
    if disable:
        return model
    backend_fn = capture.lookup_backend(backend) if isinstance(backend, str) else backend
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", type_name(backend))
    values = resolve_options(name, backend_fn, mode, options)
    return capture.optimize(
        model, backend=backend, fullgraph=fullgraph, dynamic=dynamic, options=values or None,
    )


def _check_flags(
    fullgraph: object, dynamic: object, backend: object, mode: object, options: object,
    disable: object,
) -> None:
    expect("compile", "fullgraph", fullgraph, "a bool", isinstance(fullgraph, bool))
    expect("compile", "dynamic", dynamic, "a bool or None",
           dynamic is None or isinstance(dynamic, bool))
    expect("compile", "backend", backend, "a backend name (str) or a callable",
           isinstance(backend, str) or callable(backend))
    expect("compile", "mode", mode, "a str or None", mode is None or isinstance(mode, str))
    expect("compile", "options", options, "a mapping or None",
           options is None or isinstance(options, Mapping))
    expect("compile", "disable", disable, "a bool", isinstance(disable, bool))


def reset() -> None:
    """Forget every compiled entry, so the next call of any compiled function recompiles.

    Returns:
        None.

    Examples:
        >>> import torch, compiler
        >>> f = compiler.compile(lambda x: x + 1, backend="eager")
        >>> _ = f(torch.ones(1))
        >>> compiler.reset()
        >>> f(torch.ones(1))   # captured again
        tensor([2.])

    Notes:
        Delegates to `capture.reset()` (which clears the guard caches). Compiled kernels kept
        on disk by the inductor backend are not removed.
    """
    capture.reset()


@overload
def disable(fn: _F, recursive: bool = True) -> _F: ...


@overload
def disable(fn: None = None, recursive: bool = True) -> Callable[[_F], _F]: ...


def disable(fn: _F | None = None, recursive: bool = True) -> _F | Callable[[_F], _F]:
    """Never compile `fn`: calls to it run eagerly, even from inside compiled code.

    Args:
        fn: The function to exclude from capture. Omit it to use `@compiler.disable()` (or
            `@compiler.disable(recursive=False)`) as a decorator factory;
            `@compiler.disable` works too.
        recursive: If True (default), everything `fn` calls runs eagerly too: a compiled
            function or module called inside `fn` runs its original code. If False, only
            `fn`'s own frame is skipped: compiled functions and modules that `fn` calls are
            still compiled and use their compiled code.

    Returns:
        A wrapper of `fn` that runs it eagerly (or a decorator producing one).

    Raises:
        TypeError: `fn` is not callable, or `recursive` is not a bool.

    Examples:
        >>> import torch, compiler
        >>> @compiler.disable
        ... def log_shape(x):
        ...     return tuple(x.shape)
        >>> log_shape(torch.zeros(2, 3))
        (2, 3)
        >>> compiler.is_compiling()
        False

        A skipped frame whose compiled callee still compiles:

        >>> graphs = []
        >>> def count(gm, example_inputs):
        ...     graphs.append(gm)
        ...     return gm.forward
        >>> inner = compiler.compile(lambda x: x * 2, backend=count)
        >>> @compiler.disable(recursive=False)
        ... def outer(x):
        ...     return inner(x) + 1
        >>> outer(torch.ones(2)), len(graphs)
        (tensor([3., 3.]), 1)

    Notes:
        A call to a disabled function from compiled code is a graph break around that one
        call: the code before and after it is still compiled. Under
        `compile(fullgraph=True)` it is an error instead (it cannot be part of one graph).
        With recursive=False, a skipped frame called from compiled code runs with the
        functions, methods and user modules it calls (by name or attribute: `f(x)`,
        `self.block(x)`) compiled with the caller's backend, as torch.compile does;
        torch's own layers and callees held in local variables run eagerly. Called from
        eager code, it runs as it is (functions wrapped by `compiler.compile` still compile).
    """
    expect("disable", "recursive", recursive, "a bool", isinstance(recursive, bool))
    if fn is None:

        def decorate(f: _F) -> _F:
            return disable(f, recursive)

        return decorate
    expect("disable", "fn", fn, "a callable", callable(fn))
    # NOTE: capture's wrapper keeps fn's signature (it forwards *args/**kwargs unchanged).
    return cast(_F, capture.disable(fn, recursive=recursive))


def is_compiling() -> bool:
    """Tell whether the code calling this is being captured right now.

    Returns:
        True while capture is tracing (so the calling code is being put into a graph),
        False in eager execution.

    Examples:
        >>> import compiler
        >>> compiler.is_compiling()
        False

    Notes:
        Useful to skip work that should not be traced (logging, checks on values). Capture
        treats the call as a constant True while tracing.
    """
    return bool(capture.is_compiling())

