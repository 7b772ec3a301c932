"""capture's bytecode layer: decoding, version facts, assembling code objects, and the
opcode coverage of the handler table (every opcode has a handler or an explicit refusal)."""

from __future__ import annotations

import dis
import glob
import os
import pathlib
import subprocess
import sys

import capture  # noqa: F401  # the normal package (with torch)
import pytest
from capture.bytecode import versions
from capture.bytecode.instructions import decode
from capture.interp import load_handlers
from capture.interp.registry import HANDLERS

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parent.parent / "packages" / "capture" / "src"

# Opcodes deliberately without a handler: they never appear in code we trace (module or
# class bodies, async code, pattern matching), so reaching one is a clear Unsupported.
NOT_HANDLED = {
    "CACHE", "LOAD_NAME", "STORE_NAME", "DELETE_NAME", "DELETE_GLOBAL", "IMPORT_STAR",
    "PRINT_EXPR", "GET_AITER", "GET_ANEXT", "BEFORE_ASYNC_WITH",
    "END_ASYNC_FOR", "ASYNC_GEN_WRAP", "MATCH_CLASS",
    "COPY_DICT_WITHOUT_KEYS", "GET_YIELD_FROM_ITER",
    "INTERPRETER_EXIT", "JUMP_IF_NOT_EXC_MATCH", "CHECK_EG_MATCH", "PREP_RERAISE_STAR", "LOAD_LOCALS", "LOAD_FROM_DICT_OR_GLOBALS", "LOAD_FROM_DICT_OR_DEREF",
    "CALL_INTRINSIC_2", "RESERVED", "INSTRUMENTED_LINE",
}


def test_every_opcode_has_a_handler_or_is_listed() -> None:
    load_handlers()
    missing = []
    for name in dis.opmap:
        if name.startswith(("INSTRUMENTED_", "ENTER_EXECUTOR")) or name in NOT_HANDLED:
            continue
        if dis.opmap[name] >= 256:
            continue  # pseudo-instructions: the compiler removes them before code objects exist
        if versions.normalize_opname(name) not in HANDLERS:
            missing.append(name)
    assert not missing, f"opcodes without a handler or an explicit entry: {missing}"


def test_decode_resolves_jump_targets() -> None:
    def f(xs):
        out = 0
        for x in xs:
            if x > 1:
                break
            out += x
        return out

    instrs = decode(f.__code__)
    assert all(i.target is None or 0 <= i.target < len(instrs) for i in instrs)
    assert any(i.opname == "FOR_ITER" for i in instrs)
    assert decode(f.__code__) is instrs  # cached per code object


def test_selfcheck_current_python() -> None:
    out = subprocess.run(
        [sys.executable, str(HERE / "test_bytecode_selfcheck.py"), str(SRC)],
        capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("OK")


def _other_pythons() -> list[str]:
    """Interpreters with `bytecode` installed (CAPTURE_TEST_PYTHONS, ':'-separated)."""
    listed = os.environ.get("CAPTURE_TEST_PYTHONS", "")
    return [p for p in listed.split(":") if p] or sorted(glob.glob("/tmp/venv31[2-4]/bin/python"))


@pytest.mark.parametrize("python", _other_pythons() or [None])
def test_selfcheck_other_pythons(python: str | None) -> None:
    if python is None:
        pytest.skip("no other Python with `bytecode` (set CAPTURE_TEST_PYTHONS)")
    out = subprocess.run(
        [python, str(HERE / "test_bytecode_selfcheck.py"), str(SRC)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(SRC.parent.parent / "guards" / "src")},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("OK")
