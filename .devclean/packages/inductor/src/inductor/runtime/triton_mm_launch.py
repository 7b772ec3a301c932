"""The launcher of matmul templates (`codegen/triton_mm.py`): runs either the template with
one of its configurations or ATen's call followed by the epilogue kernel, whichever the
kernel's plan chose.

`choice` "auto" (a GPU): on the first call each template configuration and the ATen
alternative run once to warm up, then five times between CUDA events; the fastest is kept
and written beside the module (`<name>.best`: `["aten"]` or the configuration), so a warm
start neither tunes nor re-times. A kernel that reads a buffer it writes (by name or through
arguments sharing memory) is never re-run for timing: it takes ATen's call. "aten" (the
interpreter's pick: nothing can be timed there) and "template" (the `mm_template='always'`
option) are fixed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from inductor import config
from inductor.codegen.triton import LAUNCH_DEBUG, MatmulPlan, TritonKernel
from inductor.runtime.triton_fastpath import FastPath
from inductor.runtime.triton_interp import interpreting
from inductor.runtime.triton_launch import (
    Launcher,
    kernel_module,
    load_triton_kernels,
    overlapping,
    write_best,
)
from inductor.runtime.triton_workers import Batch, WarmJob

log = logging.getLogger("inductor")

ATEN = "aten"
GROUP_M = 8
Choice = str | tuple[int, ...]

_lock = threading.Lock()
_launchers: dict[str, MatmulLauncher] = {}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _view(t: torch.Tensor, spec: tuple[str, tuple[int, ...], tuple[int, ...], int]
          ) -> torch.Tensor:
    _, size, stride, offset = spec
    return t.as_strided(size, stride, t.storage_offset() + offset)


class MatmulLauncher:
    """Calls one matmul template kernel: `launcher(*tensors_and_scalars)` in its params'
    order."""

    def __init__(self, kernel: TritonKernel, module: Any, best_path: Path,
                 epilogue: Launcher | None) -> None:
        assert kernel.matmul is not None
        self.kernel = kernel
        self.plan: MatmulPlan = kernel.matmul
        self.fn = getattr(module, kernel.name)
        self.best_path = best_path
        self.epilogue = epilogue
        self.index = {p: i for i, p in enumerate(kernel.params)}
        self.fast = FastPath()
        self.choice: Choice | None = None
        self.warmed = False
        #: as `Launcher.pending` (the epilogue's jobs are in this launcher's batch)
        self.pending: Batch | None = None
        if self.plan.choice == ATEN:
            self.choice = ATEN
        elif best_path.exists():
            try:
                best = json.loads(best_path.read_text())
                found: Choice = ATEN if best == [ATEN] else tuple(best)
                if found in (*self.plan.configs, ATEN) and not (
                        found == ATEN and self.plan.choice == "template"):
                    self.choice = found
            except (OSError, ValueError, TypeError):
                self.choice = None

    def warm_jobs(self) -> list[WarmJob]:
        """What compile workers compile before the first call: the template in each
        configuration it may run, and the epilogue kernel of the ATen alternative."""
        k = self.kernel
        jobs: list[WarmJob] = []
        if self.epilogue is not None and not isinstance(self.choice, tuple):
            jobs += self.epilogue.warm_jobs()
        if (k.interpret or not k.arg_types or self.warmed or self.choice == ATEN
                or self.best_path.with_suffix(".warm").exists()):
            return jobs
        self.warmed = True
        configs = [self.choice] if isinstance(self.choice, tuple) else list(self.plan.configs)
        if k.inplace or not config.options.triton_autotune:
            configs = configs[:1]
        launches = tuple((self._grid(cfg), (
            ("BLOCK_M", cfg[0]), ("BLOCK_N", cfg[1]), ("BLOCK_K", cfg[2]), ("GROUP_M", GROUP_M),
            ("num_warps", cfg[3]), ("num_stages", cfg[4]), *(LAUNCH_DEBUG if k.debug else ())))
            for cfg in configs)
        path = self.best_path.with_suffix(".py")
        return [*jobs, WarmJob(str(path), k.name, k.arg_types, launches)]

    def __call__(self, *args: Any) -> None:
        if self.kernel.interpret:
            with interpreting():
                self._call(args)
        else:
            self._call(args)

    def _call(self, args: Sequence[Any]) -> None:
        if self.pending is not None:
            self.pending.wait()
            self.pending = None
        if self.choice is None:
            self.choice = self._choose(args)
        if self.choice == ATEN:
            self._aten(args)
            return
        assert isinstance(self.choice, tuple)
        if self.fast.call(args):
            return
        try:
            compiled = self._template(self.choice, args)
        except Exception as e:
            # NOTE: a configuration Triton cannot compile here (e.g. too much shared
            # memory): ATen's call computes the same values; a kernel unsafe to re-run, or
            # one without that alternative, raises
            if self.kernel.inplace or not self.plan.has_aten or self.fast.compiled is not None:
                raise
            log.warning("matmul template %s %s failed (%s: %s); using ATen's call",
                        self.kernel.name, self.choice, type(e).__name__, e)
            self.choice = ATEN
            self._aten(args)
            return
        if not self.kernel.interpret:
            bm, bn, bk = self.choice[:3]
            self.fast.keep(compiled, self._grid(self.choice), args, (bm, bn, bk, GROUP_M))

    def _grid(self, cfg: tuple[int, ...]) -> tuple[int, ...]:
        batch, m, n, _ = self.plan.dims
        grid = _cdiv(m, cfg[0]) * _cdiv(n, cfg[1])
        return (grid, batch) if batch > 1 else (grid,)

    def _template(self, cfg: tuple[int, ...], args: Sequence[Any]) -> Any:
        bm, bn, bk, warps, stages = cfg
        grid = self._grid(cfg)
        if self.kernel.interpret:
            return self.fn[grid](*args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M)
        debug = dict(LAUNCH_DEBUG) if self.kernel.debug else {}
        return self.fn[grid](*args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M,
                             num_warps=warps, num_stages=stages, **debug)

    def _aten(self, args: Sequence[Any]) -> None:
        """ATen's call into the matmul's buffer (a fresh one when only the epilogue reads
        it), then the epilogue kernel."""
        p = self.plan
        a = _view(args[self.index[p.a[0]]], p.a)
        b = _view(args[self.index[p.b[0]]], p.b)
        name, size, stride, _ = p.out
        if name in self.index:
            out = args[self.index[name]]
        else:
            out = torch.empty_strided(size, stride, dtype=a.dtype, device=a.device)
        if p.bias is not None:
            bias = _view(args[self.index[p.bias[0]]], p.bias)
            torch.addmm(bias, a, b, beta=p.beta, alpha=p.alpha, out=out)
        elif p.op == "bmm":
            torch.bmm(a, b, out=out)
        elif p.alpha != 1.0:  # NOTE: addmm with beta=0 (its bias ignored, as eager does)
            torch.mul(torch.mm(a, b), p.alpha, out=out)
        else:
            torch.mm(a, b, out=out)
        if self.epilogue is not None:
            assert p.epilogue is not None
            self.epilogue(*(out if q == name else args[self.index[q]]
                            for q in p.epilogue.params))

    def _choose(self, args: Sequence[Any]) -> Choice:
        p = self.plan
        if p.choice == "template" or not p.has_aten:
            candidates: list[Choice] = list(p.configs)
        else:
            candidates = [ATEN, *p.configs]
        if (self.kernel.interpret or len(candidates) == 1 or self.kernel.inplace
                or not config.options.triton_autotune or not torch.cuda.is_available()
                or overlapping(args)):
            return candidates[0]
        times: list[tuple[float, int]] = []
        for pos, cand in enumerate(candidates):
            try:
                times.append((self._time(cand, args), pos))
            except Exception as e:  # noqa: BLE001 - a config that does not compile is skipped
                log.info("matmul template config %s of %s failed: %s", cand,
                         self.kernel.name, e)
        if not times:
            return candidates[0]
        best = candidates[min(times)[1]]
        log.info("matmul %s %s: %s (ms per 5 calls: %s)", self.kernel.name, p.dims, best,
                 {str(candidates[i]): round(t, 4) for t, i in times})
        write_best(self.best_path, [ATEN] if best == ATEN else list(best))
        return best

    def _time(self, cand: Choice, args: Sequence[Any]) -> float:
        def run() -> None:
            if cand == ATEN:
                self._aten(args)
            else:
                assert isinstance(cand, tuple)
                self._template(cand, args)

        run()  # NOTE: compiles and warms up
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        for _ in range(5):
            run()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))


def load_matmul_kernels(kernels: Sequence[TritonKernel]) -> dict[str, Any]:
    """Kernel name -> the launcher of a matmul template (module written and imported once
    per process; its epilogue kernel loaded as any Triton kernel)."""
    out: dict[str, Any] = {}
    for k in kernels:
        assert k.matmul is not None
        epilogue = k.matmul.epilogue
        epi = load_triton_kernels([epilogue])[epilogue.name] if epilogue is not None else None
        with _lock:
            launcher = _launchers.get(k.name)
            if launcher is None:
                launcher = MatmulLauncher(k, *kernel_module(k), epi)
                _launchers[k.name] = launcher
        out[k.name] = launcher
    return out


def clear_matmul_launchers() -> None:
    """Forget imported templates (tests of the warm start)."""
    with _lock:
        _launchers.clear()
