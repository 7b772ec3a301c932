"""A Triton compile worker: run as a script (`python triton_compile_worker.py`) by
`runtime/triton_workers.py`, never imported by the compiler itself.

It reads pickled requests from stdin, one at a time: `(path, name, signature, constants,
attrs, options, target, launcher)`, as the parent's JIT would hand them to `triton.compile`
for the kernel `name` of the module at `path`; it compiles (filling Triton's on-disk cache,
which the parent's JIT then hits), with `launcher` builds the kernel's C launcher there too
(the parent asks once per argument signature), and writes back a pickled `None` or the
error's text. It imports only
Triton and the kernel modules (no torch, no CUDA context: the target comes from the parent),
and it exits when stdin closes.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import sys
from typing import Any, BinaryIO

_modules: dict[str, Any] = {}


def load_kernel(path: str, name: str, modules: dict[str, Any]) -> Any:
    """The function `name` of the module at `path`, imported once per `modules` cache."""
    module = modules.get(path)
    if module is None:
        spec = importlib.util.spec_from_file_location(f"inductor_compile.m{len(modules)}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[path] = module
    return getattr(module, name)


def compile_one(request: tuple[Any, ...]) -> str | None:
    """Compile one request; None, or why it failed."""
    try:
        import triton  # type: ignore[import-untyped]  # NOTE: no type hints
        from triton.compiler.compiler import ASTSource  # type: ignore[import-untyped]

        path, name, signature, constants, attrs, options, target, launcher = request
        fn = load_kernel(path, name, _modules)
        kernel = triton.compile(ASTSource(fn, signature, constants, attrs), target=target,
                                options=options)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which compiles itself
        return f"{type(e).__name__}: {e}"
    if launcher:
        _build_launcher(kernel, target)
    return None


def _build_launcher(kernel: Any, target: Any) -> None:
    """Build the kernel's C launcher into Triton's cache as its first launch would (a C
    compile of about 0.25 s per argument signature on a cold cache). Best effort: the parent
    builds whatever is not there at its first launch."""
    if getattr(target, "backend", None) != "cuda":
        return
    try:
        from triton.backends.nvidia.driver import CudaLauncher  # type: ignore[import-untyped]

        CudaLauncher(kernel.src, kernel.metadata)
    except Exception:  # noqa: BLE001, S110 - the parent's first launch builds it
        pass


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer requests until the input closes."""
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        pickle.dump(compile_one(request), replies)
        replies.flush()


if __name__ == "__main__":
    # NOTE: this folder holds modules named `triton_*`; keep it off the import path
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    # NOTE: replies go to a copy of stdout; whatever else writes to stdout (Triton, a C
    # library) lands on stderr instead of in the reply stream
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.buffer, replies)
