"""`Translator`: runs one code object symbolically (the root frame or an inlined call).

In: a code object, its globals, and argument values. Out: the return `Value`, with every
tensor operation recorded in the shared `OutputGraph`. Inlined calls run in a child
translator whose `parent` is the caller (used for stack traces and nn_module_stack).
"""

from __future__ import annotations

import builtins
import types
from typing import TYPE_CHECKING

from capture.bytecode.instructions import Instruction, decode
from capture.graph_break import GraphBreakKind, Unsupported, UserFrame, unsupported
from capture.interp.registry import HANDLERS
from capture.values import CellValue, IteratorValue, Value

if TYPE_CHECKING:
    from guards.sources import Source

    from capture.output_graph import OutputGraph

MAX_INLINE_DEPTH = 48


class Translator:
    """The state of one symbolic frame: stack, locals, cells, instruction pointer."""

    def __init__(
        self,
        output: OutputGraph,
        code: types.CodeType,
        f_globals: dict[str, object],
        f_locals: dict[str, Value],
        cells: dict[str, CellValue],
        parent: Translator | None = None,
        module_entry: tuple[str, tuple[str, type]] | None = None,
        is_generator: bool = False,
    ) -> None:
        self.output = output
        self.code = code
        self.f_globals = f_globals
        builtins_obj = f_globals.get("__builtins__", builtins)
        self.f_builtins: dict[str, object] = (
            builtins_obj if isinstance(builtins_obj, dict) else builtins_obj.__dict__
        )
        self.instructions: list[Instruction] = decode(code)
        self.ip = 0
        self.stack: list[Value] = []
        self.locals = f_locals
        self.cells = cells
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.module_entry = module_entry
        self.kw_names: tuple[str, ...] = ()
        self.return_value: Value | None = None
        self.current: Instruction | None = None
        self.generator_items: list[Value] | None = [] if is_generator else None
        # Set when this frame runs a GraphModule's generated forward (its nodes' metadata
        # is carried over to the nodes traced from it).
        self.fx_module: object | None = None
        # Where guards reach `f_globals` when it is not the root frame's (None: unguarded).
        self.globals_source: Source | None = None
        if self.depth > MAX_INLINE_DEPTH:
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_CALL,
                f"inlining depth over {MAX_INLINE_DEPTH} (recursion?) at {code.co_name}",
            )

    # -- the stack ---------------------------------------------------------------------
    def push(self, value: Value) -> None:
        self.stack.append(value)

    def pop(self) -> Value:
        return self.stack.pop()

    def popn(self, n: int) -> list[Value]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump(self, ins: Instruction) -> None:
        assert ins.target is not None
        self.ip = ins.target

    # -- running -----------------------------------------------------------------------
    def run(self) -> Value:
        """Interpret until RETURN; return the returned value."""
        output = self.output
        saved_tx = output.current_tx
        output.current_tx = self
        try:
            instructions = self.instructions
            while self.return_value is None:
                ins = instructions[self.ip]
                self.ip += 1
                self.current = ins
                fn = HANDLERS.get(ins.opname)
                if fn is None:
                    raise unsupported(
                        GraphBreakKind.UNSUPPORTED_OPCODE,
                        f"instruction {ins.raw_opname} is not supported",
                    )
                fn(self, ins)
        except Unsupported as e:
            e.where.insert(0, self.user_frame())
            raise
        finally:
            output.current_tx = saved_tx
        if self.generator_items is not None:
            return IteratorValue(self.generator_items)
        return self.return_value

    # -- locations -----------------------------------------------------------------------
    def lineno(self) -> int:
        if self.current is not None and self.current.lineno is not None:
            return self.current.lineno
        return self.code.co_firstlineno

    def user_frame(self) -> UserFrame:
        return UserFrame(self.code.co_filename, self.lineno(), self.code.co_name)

    def frames(self) -> list[Translator]:
        """This translator and its callers, outermost first."""
        chain: list[Translator] = []
        tx: Translator | None = self
        while tx is not None:
            chain.append(tx)
            tx = tx.parent
        chain.reverse()
        return chain

    def stack_trace(self) -> str:
        """FX-format stack trace, innermost frame last."""
        lines = []
        for tx in self.frames():
            frame = tx.user_frame()
            lines.append(
                f'  File "{frame.filename}", line {frame.lineno}, in {frame.function}\n'
                f"    {frame.text}\n"
            )
        return "".join(lines)

    def fx_origin(self) -> object | None:
        """The node of a compiled GraphModule this instruction came from, if any."""
        import torch.fx

        tx: Translator | None = self
        while tx is not None:
            gm = tx.fx_module
            if isinstance(gm, torch.fx.GraphModule):
                lineno_map = getattr(gm, "_lineno_map", None) or {}
                start = getattr(gm, "_prologue_start", 0)
                index = lineno_map.get(tx.lineno() - start)
                if index is None:
                    return None
                nodes = list(gm.graph.nodes)
                return nodes[index] if 0 <= index < len(nodes) else None
            tx = tx.parent
        return None

    def nn_module_stack(self) -> dict[str, tuple[str, type]]:
        stack: dict[str, tuple[str, type]] = {}
        for tx in self.frames():
            if tx.module_entry is not None:
                key, entry = tx.module_entry
                stack[key] = entry
        return stack
