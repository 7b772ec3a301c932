"""The symbolic interpreter: `Translator` walks instructions with a stack of values.

Imports go one way, bottom to top (`tools/import_cycles.py` checks that no cycle is back):

- `registry` (the opcode table), `translator` (the frame walker), `dispatch` (late-bound
  entry points: call a value, get/set/missing attributes, iterate; installed by the modules
  that define them), `lookup_guards` (guards on class lookups);
- `operators` (Python operators on values), `private_objects` (objects only the trace
  knows), `builtins_table` (the special-callable table `special`/`lookup`, builtins,
  grad-mode and autocast contexts), `tensor_facts`, `attributes` (`obj.name` read, write,
  delete), `calls` (calling a value: inline, put in the graph, or a special);
- special callables registered with `builtins_table.special`: `specials_containers`
  (container methods), `specials_library` (library helpers), `copying` (copy/deepcopy),
  `autograd_specials` (autograd.Function, checkpoint), `context_specials` (grad mode,
  autocast and user context managers; contexts a graph break re-enters), `generators`,
  `foreach_specials` (foreach addcdiv/addcmul given a tensor of scalars);
- the opcode handlers, one module per kind of instruction: `handlers_calls` (CALL and
  friends), `handlers_containers` (BUILD_*, unpacking), `handlers_control` (jumps, loops,
  `with`), `handlers_exceptions`, `handlers_load_store`, `handlers_ops`.

`handlers_*` modules turn one opcode into calls of the modules below; the modules they call
(`calls`, `operators`, `attributes`, `specials_*`) implement what a Python operation means on
values, whatever opcode asked for it. `load_handlers` imports the top layers, so every
handler, special and `dispatch` entry point is installed before a trace.
"""

_loaded = False


def load_handlers() -> None:
    """Import every handler module (registering its opcodes) once."""
    global _loaded
    if _loaded:
        return
    from capture.interp import (  # noqa: F401  # imported for registration
        attributes,
        autograd_specials,
        calls,
        context_specials,
        copying,
        foreach_specials,
        handlers_calls,
        handlers_containers,
        handlers_control,
        handlers_exceptions,
        handlers_load_store,
        handlers_ops,
        specials_containers,
        specials_library,
        tensor_facts,
    )

    _loaded = True
