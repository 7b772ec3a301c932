"""Graphs with symbolic sizes (aotgrad traced them once for every size, `aotgrad.dynamic`):
the wrapper's prologue that binds the size symbols from the inputs, and the per-size
compile that serves a call the symbolic code was not made for.

In: a graph whose example inputs are fakes with symbolic sizes (or SymInts), its lowering
context. Out: prologue lines for the wrapper (`s0 = arg0.shape[0]`, then one check that
every input has the sizes and strides the kernels index it with and that no symbol is 0
or 1; a call that fails it runs `PerSize`, the graph compiled for its concrete sizes),
and `PerSize` itself.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode

from inductor import config
from inductor.ir.nodes import InputBuffer
from inductor.symbols import (
    SymbolicUnsupported,
    is_size_symbol,
    is_symbolic_value,
    pysizes,
)

log = logging.getLogger("inductor.dynamic")

_SYMBOL_TEXT = re.compile(r"\b(s[0-9]+)\b")

#: the name of the per-size compile in the wrapper's namespace
FALLBACK = "compile_for_sizes"


def is_symbolic_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> bool:
    """Whether a graph was traced for symbolic sizes (an input with a symbolic size)."""
    del gm
    return any(is_symbolic_value(x) for x in example_inputs)


def shape_env_of(example_inputs: Sequence[object]) -> Any:
    """The ShapeEnv of the example inputs' symbols (capture's), or None."""
    for x in example_inputs:
        if isinstance(x, torch.SymInt):
            return getattr(x.node, "shape_env", None)
        mode = getattr(x, "fake_mode", None)
        if mode is not None and getattr(mode, "shape_env", None) is not None:
            return mode.shape_env
    return None


def guard_count(env: Any) -> int:
    """How many guards the ShapeEnv holds (planning must not add one: it would specialize
    the compiled code to the example's sizes)."""
    return -1 if env is None else len(env.guards)


def symbols_in(text: str) -> set[str]:
    """Names of size symbols in generated source."""
    return set(_SYMBOL_TEXT.findall(text))


def size_prologue(inputs: Sequence[InputBuffer | None], input_names: Sequence[str],
                  scalars: dict[int, object], used: set[str], boxed: bool = False) -> list[str]:
    """The wrapper's first lines: bind every symbol in `used` from the inputs, and send a
    call whose inputs differ from what the code indexes to the per-size compile (`boxed`:
    the wrapper's inputs put back in its list `args`, which goes to a `BoxedPerSize`)."""
    sources: dict[str, str] = {}
    checks: list[str] = []
    for pos, expr in scalars.items():
        name = input_names[pos]
        if isinstance(expr, sympy.Symbol) and is_size_symbol(expr):
            sources.setdefault(expr.name, name)
    for inp in inputs:
        if inp is None:
            continue
        lay = inp.layout
        if all(isinstance(x, int) for x in (*lay.size, *lay.stride)):
            continue
        for d, size in enumerate(lay.size):
            if isinstance(size, sympy.Symbol) and is_size_symbol(size):
                sources.setdefault(size.name, f"{inp.name}.shape[{d}]")
        for d, stride in enumerate(lay.stride):
            if isinstance(stride, sympy.Symbol) and is_size_symbol(stride):
                sources.setdefault(stride.name, f"{inp.name}.stride()[{d}]")
        checks.append(f"{inp.name}.shape != {pysizes(lay.size)}")
        checks.append(f"{inp.name}.stride() != {pysizes(lay.stride)}")
    missing = used - set(sources)
    if missing:
        raise SymbolicUnsupported(f"size symbols {sorted(missing)} are not an input's size")
    lines = [f"{name} = {sources[name]}" for name in sorted(sources, key=lambda n: int(n[1:]))]
    checks = [f"{name} < 2" for name in sorted(sources, key=lambda n: int(n[1:]))] + checks
    if checks:
        lines.append(f"if {' or '.join(checks)}:")
        names = ", ".join(input_names)
        if boxed:
            lines.append(f"    args[:] = ({names}{',' if len(input_names) == 1 else ''})")
            lines.append(f"    del {names}")
            lines.append(f"    return {FALLBACK}(args)")
        else:
            lines.append(f"    return {FALLBACK}({names})")
    return lines


def scalar_inputs(env_values: Sequence[object]) -> dict[int, object]:
    """Position -> size expression of the graph's int inputs."""
    return {i: v for i, v in enumerate(env_values) if isinstance(v, sympy.Expr)}


class PerSize:
    """The graph compiled for each call's concrete sizes (`compile_static(gm, fakes)`),
    kept per signature: what serves a graph the symbolic path cannot compile, and a call
    whose sizes the symbolic code was not made for (a size 0 or 1, other strides)."""

    def __init__(self, gm: torch.fx.GraphModule,
                 compile_static: Callable[[torch.fx.GraphModule, list[Any]], Any]) -> None:
        self.gm = gm
        self.compile_static = compile_static
        self.compiled: dict[tuple[Any, ...], Any] = {}
        # NOTE: compiles happen at call time, outside the compiled function's options
        # (`options={...}` of compiler.compile): keep those in effect now
        self.options = config.values()

    def __call__(self, *args: Any) -> Any:
        return self.compiled_for(args)(*args)

    def compiled_for(self, args: Sequence[Any]) -> Any:
        """The graph compiled for the sizes of `args` (compiled now if it was not)."""
        key = tuple((tuple(a.shape), a.stride(), a.storage_offset(), a.dtype, a.device)
                    if isinstance(a, torch.Tensor) else (type(a), a) for a in args)
        fn = self.compiled.get(key)
        if fn is None:
            try:
                gm, fakes = concrete_graph(self.gm, args)
            except Exception as error:  # noqa: BLE001  # e.g. .item() of a fake: run ATen ops
                log.info("inductor: a symbolic graph runs op by op in ATen for the sizes %s "
                         "(%s: %s)", key, type(error).__name__, error)
                fn = self.gm
            else:
                log.info("inductor: compiling a symbolic graph for the sizes %s", key)
                with config.patch(self.options):
                    fn = self.compile_static(gm, fakes)
            self.compiled[key] = fn
        return fn


class BoxedPerSize(PerSize):
    """`PerSize` for a boxed wrapper (`aotgrad.boxed`): called with one list of inputs,
    which it clears; `compile_static` compiles boxed graphs."""

    boxed_call = True

    def __call__(self, *args: Any) -> Any:
        (inputs,) = args
        fn = self.compiled_for(inputs)
        if getattr(fn, "boxed_call", False):
            return fn(inputs)
        # NOTE: a graph compiled unboxed (run op by op in ATen): its inputs live to its end
        unboxed = list(inputs)
        inputs.clear()
        return fn(*unboxed)


def _symbol_values(gm: torch.fx.GraphModule, args: Sequence[Any]) -> dict[Any, int]:
    """Size symbol -> its value in `args` (the placeholders' symbolic sizes and ints)."""
    values: dict[Any, int] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, arg in zip(placeholders, args):
        example = node.meta.get("example_value")
        pairs: list[tuple[Any, Any]] = []
        if isinstance(example, torch.SymInt):
            pairs.append((example, arg))
        elif isinstance(example, torch.Tensor) and isinstance(arg, torch.Tensor):
            pairs += list(zip(example.shape, arg.shape))
            pairs += list(zip(example.stride(), arg.stride()))
        for sym, value in pairs:
            if isinstance(sym, torch.SymInt) and isinstance(sym.node.expr, sympy.Symbol):
                values.setdefault(sym.node.expr, int(value))
    return values


def concrete_graph(gm: torch.fx.GraphModule,
                   args: Sequence[Any]) -> tuple[torch.fx.GraphModule, list[Any]]:
    """A copy of `gm` whose example values are those of `args`' concrete sizes (the
    graph run on fakes of `args`), and those fakes."""
    graph = torch.fx.Graph()
    mapping: dict[torch.fx.Node, torch.fx.Node] = {}
    out = graph.graph_copy(gm.graph, mapping)
    graph.output(out)
    copy = torch.fx.GraphModule(gm, graph)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
    new_nodes = {old.name: new for old, new in mapping.items()}
    values = _symbol_values(gm, args)

    class Propagate(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            example = n.meta.get("example_value")
            if n.target is torch.ops.aten._local_scalar_dense.default and isinstance(
                    example, torch.SymInt) and example.node.expr.free_symbols <= set(values):
                # NOTE: a size expression read back as a number (`aotgrad.symbolic`): its
                # value at these sizes, not a data-dependent read of a fake
                result: Any = int(example.node.expr.xreplace(values))
            else:
                result = super().run_node(n)
            if n.name in new_nodes:
                new_nodes[n.name].meta["example_value"] = result
                new_nodes[n.name].meta.pop("val", None)
            return result

    with mode:
        outs = Propagate(gm).run(*fakes)
    for node in copy.graph.nodes:
        if node.op == "output":
            node.meta["example_value"] = tuple(outs) if isinstance(outs, (list, tuple)) else outs
    return copy, fakes
