"""The symbolic interpreter: `Translator` walks instructions; handlers live in the
`handlers_*` modules, registered by opcode name in `registry.HANDLERS`."""

_loaded = False


def load_handlers() -> None:
    """Import every handler module (registering its opcodes) once."""
    global _loaded
    if _loaded:
        return
    from capture.interp import (  # noqa: F401  # imported for registration
        handlers_calls,
        handlers_containers,
        handlers_control,
        handlers_exceptions,
        handlers_load_store,
        handlers_ops,
    )

    _loaded = True
