"""Calling the backend on a captured graph, and what its failure means: the graph runs
eagerly (`suppress_errors`, a tensor saved for backward changed in place, the program's own
error that eager raises too) or the compile fails with `BackendCompilerFailed`.

In: the frame's wrapper (backend, options, entry grad mode) and the `GraphModule` with its
example inputs. Out: the callable the transformed bytecode calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from capture import backends
from capture.frame_state import thread_state
from capture.graph_break import BackendCompilerFailed, GraphBreakKind, unsupported

if TYPE_CHECKING:
    from capture.frame import CompiledFunction

log = logging.getLogger("capture")

#: Autograd's error for a tensor saved for backward and changed in place afterwards.
_SAVED_TENSOR_CHANGED = "needed for gradient computation has been modified by an inplace operation"


def call_backend(
    cf: CompiledFunction, gm: torch.fx.GraphModule, example_inputs: list[Any],
    replays_effects: bool = False,
) -> Callable[..., Any]:
    """The backend's compiled callable for `gm`; a backend failure (it raises, or returns no
    callable) is logged and the graph runs eagerly under `suppress_errors`, else it raises
    `BackendCompilerFailed` naming the backend. A failure that is the program's own error
    (eager raises it too) in a frame with side effects to replay (`replays_effects`) makes
    the whole function run eagerly: a graph run eagerly could change an input in place before
    it raises, and the effects before the error would be lost."""
    thread_state.compiling = False
    grad_mode = torch.is_grad_enabled()
    # NOTE: the graph is called first thing in the transformed code, so in the caller's grad
    # mode: a backend that compiles for its example inputs' signature then gets the right one.
    torch._C._set_grad_enabled(cf.entry_grad_mode)
    try:
        if cf.options.backend:
            compiled = cf.backend(gm, example_inputs, options=dict(cf.options.backend))
        else:
            compiled = cf.backend(gm, example_inputs)
        if not callable(compiled):
            raise TypeError(f"the backend returned {compiled!r:.60}, not a callable")
        return compiled  # type: ignore[no-any-return]
    except Exception as e:
        if cf.option("suppress_errors"):
            log.warning("capture: backend %r failed on a graph of %s (%s: %s); running that "
                        "graph eagerly (suppress_errors)", cf.backend_name, cf.code.co_name,
                        type(e).__name__, e)
            return backends.eager(gm, example_inputs)
        if isinstance(e, RuntimeError) and _SAVED_TENSOR_CHANGED in str(e):
            # NOTE: the program changes in place a tensor an earlier op saved for backward:
            # eager raises only if that backward runs, while a joint trace differentiates
            # every output now. The graph runs eagerly (the error, if any, comes as eager's).
            log.info("[%d] %s: a tensor saved for backward is changed in place; running the "
                     "graph eagerly", cf.frame_id, cf.code.co_name)
            return backends.eager(gm, example_inputs)
        if _raises_eagerly(gm, example_inputs, type(e)):
            if replays_effects:
                raise unsupported(
                    GraphBreakKind.EXCEPTION,
                    f"the graph raises {type(e).__name__} for its example inputs: {e}",
                ) from e
            # NOTE: the program's own error (an in-place write to a leaf that requires grad,
            # say), found by a backend that traces with autograd: eager raises it too, so the
            # graph runs eagerly and raises it for real on each call.
            log.info("[%d] %s: the graph raises %s eagerly too; running it eagerly",
                     cf.frame_id, cf.code.co_name, type(e).__name__)
            return backends.eager(gm, example_inputs)
        raise BackendCompilerFailed(cf.backend_name, e) from e
    finally:
        torch._C._set_grad_enabled(grad_mode)
        thread_state.compiling = True


def _raises_eagerly(
    gm: torch.fx.GraphModule, example_inputs: list[Any], error: type[BaseException]
) -> bool:
    """Whether running `gm` eagerly on copies of its inputs raises an `error` (the RNG state is
    restored, the inputs are untouched)."""
    copies = [_copy(t) if isinstance(t, torch.Tensor) else t for t in example_inputs]
    rng = torch.random.get_rng_state()
    try:
        gm.forward(*copies)
    except error:
        return True
    except Exception:  # noqa: BLE001 - another error: the backend's failure stands
        return False
    finally:
        torch.random.set_rng_state(rng)
    return False


def _copy(t: torch.Tensor) -> torch.Tensor:
    """A copy with `t`'s autograd role (a leaf stays a leaf, requiring grad as `t` does) and
    its layout in a copy of its storage: strides, offset and overlap (an expanded input
    written in place raises eagerly only while its elements share memory)."""
    try:
        storage = t.untyped_storage().clone()  # type: ignore[no-untyped-call]  # torch's storage API is untyped
        same = torch.empty(0, dtype=t.dtype, device=t.device)
        same.set_(storage, t.storage_offset(), t.size(), t.stride())
    except (RuntimeError, NotImplementedError, TypeError):
        same = t.detach().clone()
    if t.is_leaf:
        return same.requires_grad_(t.requires_grad)
    if not t.requires_grad:
        return same
    # NOTE: a non-leaf: a view of a clone of the whole storage made a leaf, so in-place
    # writes are allowed as on `t` itself.
    numel = same.untyped_storage().nbytes() // max(t.element_size(), 1)
    flat = torch.empty(0, dtype=t.dtype, device=t.device)
    flat.set_(same.untyped_storage(), 0, (numel,), (1,))
    return flat.requires_grad_(True).clone().as_strided(t.size(), t.stride(), same.storage_offset())
