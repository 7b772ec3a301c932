"""Boxed backwards (`aotgrad.boxed`): aot_eager's compiled backward takes its inputs as one
list it clears, so a saved activation is freed after its last use inside the backward; the
gradients stay eager's, with retain_graph too, and after a round trip through the disk form."""

from __future__ import annotations

import weakref
from typing import Any

import aotgrad
import torch
from aotgrad.backend import run_graph_as_is
from aotgrad.boxed import BoxedCode
from torch import fx
from torch.utils._python_dispatch import TorchDispatchMode


def _program(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x @ w)  # saved: x, w, a (tanh's output) ...
    b = torch.tanh(a @ w)
    return (b * b).sum()


def _inputs() -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(64, 32, requires_grad=True), torch.randn(32, 32, requires_grad=True)]


class _AliveAtEachOp(TorchDispatchMode):
    """How many of `refs` are alive when each op of the backward starts."""

    def __init__(self, refs: list[weakref.ref[torch.Tensor]]) -> None:
        super().__init__()
        self.refs = refs
        self.alive: list[int] = []
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.alive.append(sum(r() is not None for r in self.refs))
        self.ops.append(func.__name__)
        return func(*args, **(kwargs or {}))


def _program_writing_a_buffer(x: torch.Tensor, w: torch.Tensor,
                              steps: torch.Tensor) -> torch.Tensor:
    """`_program` that also writes an input (as batch norm writes its running statistics):
    the runtime's forward then saves through its general path (mutated inputs)."""
    steps.add_(1)
    return _program(x, w)


def _check_freed_inside_the_backward(program: Any, *extra: torch.Tensor) -> None:
    compiled = aotgrad.aot_function(program, run_graph_as_is)
    x, w = _inputs()
    compiled(x, w, *extra).backward()  # NOTE: compiles the backward
    x.grad = w.grad = None
    refs: list[weakref.ref[torch.Tensor]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t is not x and t is not w:
            refs.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = compiled(x, w, *extra)
    assert refs and all(r() is not None for r in refs)
    mode = _AliveAtEachOp(refs)
    with mode:
        loss.backward()
    assert mode.alive[0] == len(refs)
    last_mm = max(i for i, op in enumerate(mode.ops) if op.startswith("mm"))
    # NOTE: unboxed, every saved activation lives until the graph returns (after its last
    # matmul); boxed, the first is freed well before
    assert min(mode.alive[:last_mm]) < len(refs)
    want_x, want_w = _inputs()
    _program(want_x, want_w).backward()
    torch.testing.assert_close(x.grad, want_x.grad)
    torch.testing.assert_close(w.grad, want_w.grad)


def test_saved_activations_are_freed_inside_the_backward() -> None:
    _check_freed_inside_the_backward(_program)


def test_saved_activations_are_freed_when_the_program_writes_an_input() -> None:
    # NOTE: the runtime rebuilt the saved values with iterators that it kept to the end of
    # the backward, holding every saved tensor
    steps = torch.zeros(())
    _check_freed_inside_the_backward(_program_writing_a_buffer, steps)
    assert steps.item() == 2


def test_retain_graph_backward_twice_equals_eager() -> None:
    compiled = aotgrad.aot_function(_program, run_graph_as_is)
    x, w = _inputs()
    loss = compiled(x, w)
    loss.backward(retain_graph=True)
    loss.backward()
    want_x, want_w = _inputs()
    want = _program(want_x, want_w)
    want.backward(retain_graph=True)
    want.backward()
    torch.testing.assert_close(x.grad, want_x.grad)
    torch.testing.assert_close(w.grad, want_w.grad)


def test_boxed_backward_round_trips_through_its_disk_form() -> None:
    graphs: list[Any] = []

    def keep(gm: Any, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return run_graph_as_is(gm, example_inputs)

    class Keeping:
        def __call__(self, gm: Any, example_inputs: list[Any]) -> Any:
            return keep(gm, example_inputs)

        def compile_boxed(self, gm: Any, example_inputs: list[Any]) -> Any:
            graphs.append(gm)
            boxed = run_graph_as_is.compile_boxed(gm, example_inputs)
            graphs.append(boxed)
            return boxed

    compiled = aotgrad.aot_function(_program, Keeping())
    x, w = _inputs()
    compiled(x, w).backward()
    boxed = graphs[-1]
    assert getattr(boxed, "boxed_call", False)
    state = run_graph_as_is.save_compiled(boxed, graphs[-2])
    assert isinstance(state, BoxedCode)
    loaded = run_graph_as_is.load_compiled(state)
    bw_gm = graphs[-2]
    examples = [n.meta["example_value"] for n in bw_gm.graph.nodes if n.op == "placeholder"]
    torch.manual_seed(1)
    args = [torch.randn(e.shape, dtype=e.dtype) for e in examples]
    want = bw_gm(*args)
    listed = list(args)
    got = loaded(listed)
    assert listed == []  # the callee cleared its inputs
    for g, e in zip(got, want):
        if e is None:
            assert g is None
        else:
            torch.testing.assert_close(g, e)


class _KeyedCompiler:
    """An ATen-graph compiler whose options say what it compiles (`cache_key`), boxed too."""

    def __init__(self) -> None:
        self.option = "a"

    def cache_key(self) -> tuple[str]:
        return (self.option,)

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        return gm

    def compile_boxed(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        return self(gm, example_inputs)


def test_the_checked_compiler_keeps_the_compilers_options_key() -> None:
    """The wrapper aotgrad puts around a compiler (`pipeline.checked_compiler`) answers the
    compiler's `cache_key()` as it is now: runners sharing compiled backwards key them on it,
    so a backward compiled under other options is not taken for this one."""
    from aotgrad.pipeline import checked_compiler

    inner = _KeyedCompiler()
    checked: Any = checked_compiler(inner)
    assert checked.cache_key() == ("a",) and hasattr(checked, "compile_boxed")
    inner.option = "b"
    assert checked.cache_key() == ("b",)
    plain: Any = checked_compiler(lambda gm, example_inputs: gm)
    assert not hasattr(plain, "cache_key")
