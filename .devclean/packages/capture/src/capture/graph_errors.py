"""A compiled graph that raises at run time: the frame runs again eagerly, so the user gets
eager's exception together with every Python side effect eager made before it.

The transformed code calls the frame's graph first and replays the recorded Python side
effects (list appends, attribute and global writes) after it. When the graph raises (an
overlapping in-place copy, an index out of range, a failed runtime assert), the replay never
runs, yet eager would have made the effects that come before the failing op in program order.
Nothing observable has happened in the frame before the graph call, so running the original
function eagerly from the start gives exactly eager's behaviour, provided the failed graph
run left no trace either:

- no tensor input changed in place (their version counters are compared: the eager backend
  runs in-place ops one by one, functionalized backends write mutations back only at the end);
- grad mode is restored to the one the call started in (the eager backend runs a graph's
  `torch._C._set_grad_enabled` nodes as it goes);
- the CPU random-number state is restored when the graph draws random numbers.

A backend that runs the captured graph as it is (the eager backend: it returns the graph
module's `forward`) changes inputs in place op by op, so an input may have changed before the
op that raised. For such a graph, the inputs its in-place ops may reach are copied before each
call and, when the run raises, copied back with their version counters reset, so the eager
rerun starts from the inputs eager saw. An input that requires grad is not copied (writing it
back would not restore its autograd history): when one changed, or a backend that wraps the
graph some other way changed one, the exception is raised as it is (the side effects before
it are then lost, logged). Only graphs of frames with side effects to replay or grad-mode
switches are wrapped (the others lose nothing when they raise), so plain frames pay nothing.

Protocol: `guard_graph(...)` wraps the backend's callable; when it raises and a rerun is
sound, the exception is marked with the frame's code object. The frame wrapper
(`CompiledFunction`) catches exceptions of its entry, and `claim(error, code)` says whether
to run the function eagerly instead of letting the exception through.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

__all__ = ["GuardedGraph", "claim", "guard_graph", "needs_guard"]

log = logging.getLogger("capture")

#: The attribute of a marked exception: the code object of the frame to run eagerly.
_MARK = "_capture_rerun_eagerly"

# NOTE: a name with one of these in it may draw random numbers (false positives only cost a
# saved RNG state per call).
_RANDOM_WORDS = ("rand", "dropout", "bernoulli", "multinomial", "normal", "uniform",
                 "exponential", "cauchy", "geometric", "poisson")


def _name(target: object) -> str:
    if isinstance(target, str):
        return target.lower()
    return str(getattr(target, "__name__", target)).lower()


def _switches_grad_mode(gm: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_function" and n.target is torch._C._set_grad_enabled
               for n in gm.graph.nodes)


def _draws_random(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op == "call_module":
            return True  # NOTE: not looked into: assume it may
        if node.op in ("call_function", "call_method"):
            name = _name(node.target)
            if any(word in name for word in _RANDOM_WORDS):
                return True
    return False


# NOTE: the augmented assignments run in place on tensors (`x += 1` traces to operator.iadd).
_IN_PLACE_OPERATORS = frozenset({
    operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
    operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior,
    operator.ixor, operator.ilshift, operator.irshift, operator.imatmul,
})


def _in_place_operands(node: torch.fx.Node) -> list[object]:
    """The operands `node` may write into: its first argument for an in-place op (a name
    ending in one underscore, an augmented assignment, setitem), and any `out=` argument."""
    written: list[object] = []
    if "out" in node.kwargs:
        written.append(node.kwargs["out"])
    if node.op not in ("call_function", "call_method") or not node.args:
        return written
    if node.op == "call_function" and node.target in _IN_PLACE_OPERATORS:
        written.append(node.args[0])
        return written
    name = _name(node.target).rsplit(".", 1)[-1]
    if name.endswith("_") and not name.endswith("__"):
        written.append(node.args[0])
    return written


def _placeholders_reached(value: object) -> set[torch.fx.Node]:
    """The placeholders among `value`'s ancestors (a view's base and more: an over-estimate
    only costs a copy)."""
    found: set[torch.fx.Node] = set()
    seen: set[torch.fx.Node] = set()
    stack: list[torch.fx.Node] = []
    torch.fx.node.map_arg(value, stack.append)  # type: ignore[type-var]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op == "placeholder":
            found.add(node)
        stack.extend(node.all_input_nodes)
    return found


def mutated_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """Positions of the inputs of `gm` that its in-place ops may change (through views too)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    reached: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        for operand in _in_place_operands(node):
            reached |= _placeholders_reached(operand)
    return [i for i, p in enumerate(placeholders) if p in reached]


def _runs_graph_as_is(compiled: Callable[..., Any], gm: torch.fx.GraphModule) -> bool:
    return compiled is gm or getattr(compiled, "__self__", None) is gm


def needs_guard(gm: torch.fx.GraphModule, has_side_effects: bool) -> bool:
    """Whether a run-time exception of `gm` could lose state eager would have: the frame
    replays side effects after the graph, or the graph switches grad mode."""
    return has_side_effects or _switches_grad_mode(gm)


class GuardedGraph:
    """A compiled graph whose exceptions are marked for an eager rerun of the frame of
    `code` when the failed run left no trace (see the module doc). `random`: the graph may
    draw random numbers (the CPU RNG state is saved per call); `copied`: the positions of
    the inputs copied before each call (a graph run as it is). A class, not a closure, so
    the frame disk cache (`compiler.frame_cache`) can record and rebuild it."""

    def __init__(self, compiled: Callable[..., Any], random: bool, copied: tuple[int, ...],
                 code: object) -> None:
        self.compiled = compiled
        self.random = random
        self.copied = copied
        self.code = code

    def __call__(self, *args: Any) -> Any:
        grad = torch.is_grad_enabled()
        tensor = torch.Tensor
        try:
            versions: list[int] | None = [a._version for a in args if isinstance(a, tensor)]
        except RuntimeError:  # NOTE: inference tensors have no version counter
            versions = None
        rng = torch.get_rng_state() if self.random else None
        copied = self.copied
        saved = _copy_inputs(args, copied) if copied and versions is not None else None
        try:
            return self.compiled(*args)
        except Exception as error:
            torch._C._set_grad_enabled(grad)
            if saved and versions is not None:
                _write_back(saved)
            if versions is not None and versions == [
                    a._version for a in args if isinstance(a, tensor)]:
                if rng is not None:
                    torch.set_rng_state(rng)
                _mark(error, self.code)
            else:
                log.debug("capture: a graph of %s raised %s after changing an input in place; "
                          "side effects before it are not replayed",
                          getattr(self.code, "co_name", "?"), type(error).__name__)
            raise


def guard_graph(compiled: Callable[..., Any], gm: torch.fx.GraphModule,
                code: object) -> GuardedGraph:
    """`compiled`, whose exceptions are marked for an eager rerun of the frame of `code`
    when the failed run left no trace (see the module doc)."""
    copied = tuple(mutated_inputs(gm)) if _runs_graph_as_is(compiled, gm) else ()
    return GuardedGraph(compiled, _draws_random(gm), copied, code)


def _copy_inputs(args: tuple[Any, ...],
                 positions: tuple[int, ...]) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """(input, copy, version) of each tensor input at `positions` that does not require grad."""
    saved = []
    with torch.no_grad():
        for i in positions:
            a = args[i]
            if isinstance(a, torch.Tensor) and not a.requires_grad:
                saved.append((a, a.clone(), a._version))
    return saved


def _write_back(saved: list[tuple[torch.Tensor, torch.Tensor, int]]) -> None:
    """Copy changed inputs back from `saved` and reset their version counters (an input
    that is a view of another shares its counter, so it is reset too)."""
    changed = [(a, c, v) for a, c, v in saved if a._version != v]
    if not changed:
        return
    with torch.no_grad():
        for a, c, _ in changed:
            a.copy_(c)
    torch._C._autograd._unsafe_set_version_counter(
        tuple(a for a, _, _ in changed), tuple(v for _, _, v in changed))


def _mark(error: BaseException, code: object) -> None:
    try:
        setattr(error, _MARK, code)
    except (AttributeError, TypeError):
        pass  # NOTE: an exception without attributes: raised as it is


def claim(error: BaseException, code: object) -> bool:
    """Whether `error` was raised by the graph of `code`'s frame and that frame should run
    eagerly instead (the mark is removed: an outer frame never acts on it)."""
    if getattr(error, _MARK, None) is not code:
        return False
    try:
        delattr(error, _MARK)
    except AttributeError:
        pass
    log.info("capture: the compiled graph of %s raised %s; running the function eagerly for "
             "eager's exception and side effects", getattr(code, "co_name", "?"),
             type(error).__name__)
    return True
