"""Compiling one frame: trace it from its bound arguments, emit the new bytecode (the graph
call first, the Python work left after, the side effects replayed), and hand the graph to
the backend.

In: the frame's wrapper, a fresh `OutputGraph`, the call's locals `L` and, for a graph
break, where to stop. Out: the transformed code object and the captured `GraphModule`
(None when the frame put nothing in a graph).
"""

from __future__ import annotations

import logging
import types
from typing import TYPE_CHECKING

import torch
from guards.sources import LocalSource

from capture import graph_errors, logs, resume, runtime_checks
from capture.backend_call import call_backend
from capture.bytecode import codegen
from capture.graph_break import GraphBreakKind, unsupported
from capture.guard_builder import guarded_inputs
from capture.interp import load_handlers
from capture.interp.lookup_guards import guard_own_defaults
from capture.interp.translator import Translator
from capture.output_graph import OutputGraph
from capture.replay import replay_side_effects
from capture.shape_guards import check_marked
from capture.values import CellValue, Value
from capture.values.wrap import wrap

if TYPE_CHECKING:
    from capture.frame import CompiledFunction


def trace_and_codegen(
    cf: CompiledFunction,
    output: OutputGraph,
    L: dict[str, object],
    marker: str,
    stop: resume.BreakPoint | None = None,
) -> tuple[types.CodeType, torch.fx.GraphModule | None]:
    """Trace `cf`'s frame from `L` (to its end, or up to `stop` and break the graph there)
    and return its new code object and captured graph."""
    load_handlers()
    code = cf.code
    guard_own_defaults(output, cf.fn)
    f_locals: dict[str, Value] = {}
    cells: dict[str, CellValue] = {}
    for name, value in L.items():
        wrapped = wrap(output, value, LocalSource(name))
        if name in code.co_freevars:
            cells[name] = CellValue(wrapped, LocalSource(name))
        else:
            f_locals[name] = wrapped
    tx = Translator(output, code, cf.f_globals, f_locals, cells)
    cg = codegen.CodeBuilder(code)
    if stop is None:
        result = tx.run()
        output.current_tx = None
        cg.reconstruct(result)
        cg.store_fast(codegen.RETURN_TMP)
        replay_side_effects(cg, output)
        cg.load_fast(codegen.RETURN_TMP)
        cg.instrs.append(codegen.Instr("RETURN_VALUE"))
    else:
        if not tx.run_to((stop.index, stop.visit)):
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "the break point was not reached")
        output.current_tx = None
        resume.emit_break(
            cg, tx, lambda: replay_side_effects(cg, output), cf.resume_function,
            cf.compiled_callee, stop.in_callee,
        )
    body = cg.instrs
    gm: torch.fx.GraphModule | None = None
    has_calls = any(n.op != "placeholder" for n in output.graph.nodes)
    check_marked(output.symbolic, output.shape_env)
    if has_calls or cg.graph_outputs:
        runtime_checks.add_runtime_checks(output.graph, output.fake_mode.shape_env)
        output.graph.output(tuple(v.node for v in cg.graph_outputs))
        gm = torch.fx.GraphModule(torch.nn.Module(), output.graph, "CapturedGraph")
        if cf.option("verbose") or logs.graph_log.isEnabledFor(logging.DEBUG):
            logs.verbose_print("graph", marker, gm.print_readable(print_output=False))
        example_inputs = [example for _, example, _ in output.inputs]
        gm.meta["guarded_inputs"] = guarded_inputs(output)
        replays = not output.side_effects.is_empty()
        compiled = call_backend(cf, gm, example_inputs, replays)
        if graph_errors.needs_guard(gm, replays):
            compiled = graph_errors.guard_graph(compiled, gm, code)
        pre = codegen.CodeBuilder(code)
        pre.load_callable(compiled)
        pre.load_sources([source for source, _, _ in output.inputs])
        pre.call_function(len(output.inputs))
        pre.store_fast(codegen.GRAPH_OUT)
        body = pre.instrs + body
    return codegen.assemble(code, body), gm
