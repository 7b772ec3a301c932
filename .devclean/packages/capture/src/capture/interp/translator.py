"""`Translator`: runs one code object symbolically (the root frame or an inlined call).

In: a code object, its globals, and argument values. Out: the return `Value`, with every
tensor operation recorded in the shared `OutputGraph`. Inlined calls run in a child
translator whose `parent` is the caller (used for stack traces and nn_module_stack).
"""

from __future__ import annotations

import builtins
import types
from typing import TYPE_CHECKING

from capture.bytecode.instructions import Instruction, decode, exception_handler
from capture.graph_break import GraphBreakKind, RaisedInTrace, Unsupported, UserFrame, unsupported
from capture.interp.generators import GeneratorValue
from capture.interp.registry import HANDLERS
from capture.values import CellValue, ConstantValue, Value

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
        self.is_generator = is_generator
        # Generator frames: the value of the last YIELD_VALUE, until `resume` hands it out.
        self.yielded: Value | None = None
        self.started = False
        # Generators created by this frame and the frames it inlined (root frame only).
        self.generators: list[GeneratorValue] = []
        # Root frame: times each instruction ran, and where to stop for a graph break.
        self.visits: dict[int, int] = {}
        self.stop_at: tuple[int, int] | None = None
        self.stopped = False
        # The exception being handled (`sys.exc_info()`), set by PUSH_EXC_INFO.
        self.exc_info: Value | None = None
        # Open handlers, outermost first: (stack slot of the exception PUSH_EXC_INFO
        # saved, that saved value, the exception handled); a graph break inside a handler
        # enters it again in the resume function.
        self.handled: list[tuple[int, Value, Value]] = []
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
        """Interpret until RETURN; return the returned value (a generator: the generator)."""
        if self.is_generator:
            generator = GeneratorValue(self)
            self.frames()[0].generators.append(generator)
            return generator
        self.execute()
        assert self.return_value is not None
        if self.parent is None:
            for generator in self.generators:
                generator.check_abandoned()
        return self.return_value

    def run_to(self, stop: tuple[int, int]) -> bool:
        """Run the root frame up to (not including) the `stop[1]`-th execution of
        instruction `stop[0]`; False if it returned first."""
        self.stop_at = stop
        self.execute()
        if self.stopped:
            for generator in self.generators:
                generator.check_abandoned()
        return self.stopped

    def resume(self) -> Value | None:
        """Run a generator frame to its next yield: the yielded value, or None at return."""
        if self.return_value is not None:
            return None
        if self.started and self.yielded is None:
            self.push(ConstantValue(None))  # the value `send` delivers to the yield
        self.started = True
        self.yielded = None
        self.execute()
        item = self.yielded
        self.yielded = None
        return item

    def execute(self) -> None:
        """Interpret until RETURN or (in a generator) YIELD_VALUE."""
        output = self.output
        saved_tx = output.current_tx
        output.current_tx = self
        try:
            instructions = self.instructions
            root = self.parent is None
            while self.return_value is None and self.yielded is None:
                if root:
                    visit = self.visits.get(self.ip, 0) + 1
                    self.visits[self.ip] = visit
                    if self.stop_at == (self.ip, visit):
                        self.stopped = True
                        return
                ins = instructions[self.ip]
                self.ip += 1
                self.current = ins
                fn = HANDLERS.get(ins.opname)
                if fn is None:
                    raise unsupported(
                        GraphBreakKind.UNSUPPORTED_OPCODE,
                        f"instruction {ins.raw_opname} is not supported",
                    )
                try:
                    fn(self, ins)
                except RaisedInTrace as raised:
                    self.unwind(raised)
        except Unsupported as e:
            e.where.insert(0, self.user_frame())
            if self.parent is None and e.break_at is None:
                e.break_at = (self.ip - 1, self.visits.get(self.ip - 1, 0))
            raise
        finally:
            output.current_tx = saved_tx

    def unwind(self, raised: RaisedInTrace) -> None:
        """Continue at the handler covering the current instruction, or re-raise."""
        entry = exception_handler(self.code, self.ip - 1)
        if entry is None:
            raise raised
        del self.stack[entry.depth :]
        if entry.lasti:
            self.push(ConstantValue(self.instructions[self.ip - 1].offset))
        self.push(ConstantValue(raised.exception))
        self.ip = entry.target

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
