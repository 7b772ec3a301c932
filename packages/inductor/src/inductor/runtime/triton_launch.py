"""The Triton launcher: write each generated module into the cache directory, import it
(interpreted kernels under `TRITON_INTERPRET=1`), and launch its kernel over the grid its
block sizes give.

On a GPU a kernel with several candidate configurations (`TritonKernel.configs`: block
sizes and warps) times each on its first call with CUDA events and keeps the fastest; the
winner is written beside the module (`<name>.best`), so a warm start neither tunes nor
re-times. A kernel that reads a buffer it writes (by name, or through arguments that share
memory at run time) is never run twice: it takes the first configuration. After the first
launch, later calls go through the compiled kernel directly (skipping the JIT's argument
binding) while the arguments keep the first call's alignment. The launch that compiled a
kernel records its binary (`runtime/triton_binary.py`); a later process launches it from the
record, without the JIT or importing the module. A split reduction
(`codegen/triton_split.py`) launches its two kernels with fresh workspaces for the partials.

A kernel that takes its sizes as arguments (a graph of symbolic sizes: `TritonKernel.sizes`)
gets them last; each call computes its grid from them, and its block sizes are chosen (and on
a GPU timed) once per size bucket (the powers of two at or above xnumel and rnumel).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from inductor import config
from inductor.codegen.triton import LAUNCH_DEBUG, TritonKernel
from inductor.codegen.triton_rules import PERSISTENT_MAX, triton_configs
from inductor.runtime import triton_binary
from inductor.runtime.triton_fastpath import FastPath
from inductor.runtime.triton_interp import interpreting
from inductor.runtime.triton_workers import Batch, WarmJob

log = logging.getLogger("inductor")

_lock = threading.Lock()
_launchers: dict[str, Launcher] = {}


def _module_dir() -> Path:
    path = Path(config.options.cache_dir) / "triton"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write(path: Path, text: str) -> None:
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _import(kernel: TritonKernel, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"inductor_triton.{kernel.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with config.triton_interpreter(kernel.interpret):
        spec.loader.exec_module(module)
    return module


def overlapping(args: Sequence[Any]) -> bool:
    """Whether two tensor arguments share memory (a buffer reused under another name, or an
    alias an ATen call returned): then a kernel may read what it writes, and timing it by
    running it again would compute from its own output."""
    spans = sorted((a.untyped_storage().data_ptr(), a.untyped_storage().nbytes())
                   for a in args if isinstance(a, torch.Tensor))
    return any(start < prev + size_prev for (prev, size_prev), (start, _) in
               itertools.pairwise(spans))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


_UNLOADED: Any = object()


class Launcher:
    """Calls one kernel: `launcher(*tensors_and_scalars)`.

    Its module (`@triton.jit` functions) is imported at the first launch that needs the JIT:
    a warm start whose launches all go through recorded binaries (`triton_binary`) imports
    none (MobileNetV3's 49 kernel modules cost 0.28 s of a warm first call: each decorates
    its prelude's helpers again)."""

    def __init__(self, kernel: TritonKernel, module_path: Path, best_path: Path) -> None:
        self.kernel = kernel
        self.module_path = module_path
        self._fn: Any = _UNLOADED
        self._final: Any = _UNLOADED
        self.best_path = best_path
        self.config: tuple[int, int, int] | None = None
        if best_path.exists():
            try:
                best = tuple(json.loads(best_path.read_text()))
                if best in kernel.configs:
                    self.config = best
            except (OSError, ValueError):
                self.config = None
        self.fast = FastPath()
        self.fast_final = FastPath()
        #: the compiled kernels' records (`runtime/triton_binary.py`): the kernel's, a split
        #: reduction's final kernel's; each looked for, and written, once per process
        self.record = best_path.with_suffix(".bin")
        self.record_final = best_path.with_suffix(".final.bin")
        self._tried: set[Path] = set()
        self._recorded: set[Path] = set()
        #: a split reduction's per-call constants (`_split_plan`): workspace numel and
        #: dtypes, the first tensor argument's position (its device), the final kernel's
        #: configuration, the debug launch options
        self._split_consts: tuple[Any, ...] | None = None
        self._numels: Any = None
        self._by_bucket: dict[tuple[int, int], tuple[int, int, int]] = {}
        self.warmed = False
        #: the workers' batch compiling this kernel (`start_in_workers`): waited for at the
        #: first launch, so that the JIT finds the binaries in the cache
        self.pending: Batch | None = None
        if kernel.sizes:
            # NOTE: `(xnumel, rnumel)` of a call from its size arguments (source we generated)
            self._numels = eval(
                f"lambda {', '.join(kernel.sizes)}: {kernel.numels}")

    def _load(self) -> None:
        module = _import(self.kernel, self.module_path)
        if self._fn is _UNLOADED:
            self._fn = getattr(module, self.kernel.name)
        if self._final is _UNLOADED:
            self._final = getattr(module, f"{self.kernel.name}_final", None)

    @property
    def fn(self) -> Any:
        """The kernel's `@triton.jit` function (its module imported at the first use)."""
        if self._fn is _UNLOADED:
            self._load()
        return self._fn

    @fn.setter
    def fn(self, value: Any) -> None:
        self._fn = value

    @property
    def final(self) -> Any:
        """A split reduction's final `@triton.jit` function (None for other kernels)."""
        if self._final is _UNLOADED:
            self._load()
        return self._final

    @final.setter
    def final(self, value: Any) -> None:
        self._final = value

    def warm_jobs(self) -> list[WarmJob]:
        """What compile workers compile before the first call: the kernel in each
        configuration it may run (none for the interpreter, split reductions, kernels
        taking their sizes, or once compiled)."""
        k = self.kernel
        if (k.interpret or k.sizes or not k.arg_types or self.warmed
                or self.fast.compiled is not None
                or self.best_path.with_suffix(".warm").exists()):
            return []
        self.warmed = True
        configs = [self.config] if self.config is not None else list(k.configs)
        if k.inplace or not config.options.triton_autotune:
            configs = configs[:1]
        debug = LAUNCH_DEBUG if k.debug else ()
        path = str(self.best_path.with_suffix(".py"))
        if k.split > 1:
            # NOTE: a split reduction's partial kernel in each configuration and its final
            # kernel (one configuration), both taking the workspaces after the arguments;
            # compiled at the first call instead, they cost ResNet-50's training 40 serial
            # compiles in the main process.
            args = (*k.arg_types, *k.workspaces)
            fxb, frb, fgrid, fwarps = self._final_config()
            final = (fgrid, (("XBLOCK", fxb), ("RBLOCK", frb), ("num_warps", fwarps), *debug))
            return [WarmJob(path, k.name, args, tuple(
                        ((k.split, _cdiv(k.xnumel, cfg[0])),
                         (("XBLOCK", cfg[0]), ("RBLOCK", cfg[1]), ("num_warps", cfg[2]),
                          *debug)) for cfg in configs)),
                    WarmJob(path, f"{k.name}_final", args, (final,))]
        launches = tuple((self._grid(cfg), (("XBLOCK", cfg[0]), ("RBLOCK", cfg[1]),
                                            ("num_warps", cfg[2]), *debug)) for cfg in configs)
        return [WarmJob(path, k.name, k.arg_types, launches)]

    def _final_config(self) -> tuple[int, int, tuple[int, ...], int]:
        """A split reduction's final kernel: XBLOCK, RBLOCK, grid, warps (over `split`
        partials of each row)."""
        k = self.kernel
        frb = 1 << max(0, (k.split - 1).bit_length())
        fxb = max(1, min(1 << max(0, (k.xnumel - 1).bit_length()), 2048 // frb))
        return fxb, frb, (_cdiv(k.xnumel, fxb),), 4 if fxb * frb <= 1024 else 8

    def _grid(self, cfg: tuple[int, int, int],
              numels: tuple[int, int] | None = None) -> tuple[int, ...]:
        k = self.kernel
        if k.tile:
            sx, sy, sz = k.tile
            return (sz * _cdiv(sy, cfg[1]) * _cdiv(sx, cfg[0]),)
        xnumel, rnumel = numels if numels is not None else (k.xnumel, k.rnumel)
        total = xnumel if k.reduction else xnumel * rnumel
        return (_cdiv(total, cfg[0]),)

    def _run(self, cfg: tuple[int, int, int], args: Sequence[Any],
             numels: tuple[int, int] | None = None) -> Any:
        xb, rb, warps = cfg
        grid = self._grid(cfg, numels)
        extra: dict[str, Any] = dict(LAUNCH_DEBUG) if self.kernel.debug else {}
        if self.kernel.one_block:
            assert numels is not None
            extra["ONE_BLOCK"] = rb >= numels[1]
        if self.kernel.interpret:
            return self.fn[grid](*args, XBLOCK=xb, RBLOCK=rb, **extra)
        return self.fn[grid](*args, XBLOCK=xb, RBLOCK=rb, num_warps=warps, **extra)

    def _call_symbolic(self, args: Sequence[Any]) -> None:
        """A kernel taking its sizes: grid and block sizes from this call's sizes."""
        k = self.kernel
        numels: tuple[int, int] = self._numels(*args[len(args) - len(k.sizes):])
        bucket = (_pow2(numels[0]), _pow2(numels[1]))
        cfg = self._by_bucket.get(bucket)
        if cfg is None:
            one_block = k.one_block and bucket[1] <= PERSISTENT_MAX
            configs = triton_configs(*bucket, k.reduction, k.persistent or one_block,
                                     k.interpret)
            cfg = self._tune(args, configs, numels)
            self._by_bucket[bucket] = cfg
        self._run(cfg, args, numels)

    def __call__(self, *args: Any) -> None:
        if self._numels is not None:
            self._call_symbolic(args)
            return
        if self.kernel.split > 1:
            self._split(args)
            return
        if self.fast.call(args) or self._from_record(args):
            return
        if self.pending is not None:
            self.pending.wait()
            self.pending = None
        if self.config is None:
            self.config = self._tune(args)
        compiled = self._run(self.config, args)
        if not self.kernel.interpret:
            self.fast.keep(compiled, self._grid(self.config), args, self.config[:2])
            self._record(self.record, compiled, args, self.config)

    def _from_record(self, args: Sequence[Any]) -> bool:
        """The first launch of a kernel whose compiled form a launch recorded (a warm
        start): in the configuration tuning chose (or the record's), without the JIT."""
        if self.kernel.interpret or self.record in self._tried:
            return False
        cfg = self.config
        if cfg is None:
            recorded = triton_binary.recorded_config(self.record)
            if recorded not in self.kernel.configs:
                return False
            cfg = recorded
        assert cfg is not None
        if not self._launch_recorded(self.fast, self.record, args, cfg, self._grid(cfg)):
            return False
        self.config = cfg
        return True

    def _launch_recorded(self, fast: FastPath, path: Path, args: Sequence[Any],
                         cfg: Sequence[int], grid: tuple[int, ...]) -> bool:
        """Launch through the compiled kernel recorded at `path` (once per process);
        False when there is none for configuration `cfg` and these arguments."""
        if path in self._tried or fast.compiled is not None or not fast.on:
            return False
        self._tried.add(path)
        compiled = triton_binary.load(path, args, cfg, self._variant())
        if compiled is None:
            return False
        fast.keep(compiled, grid, args, tuple(cfg[:2]))
        return fast.call(args)

    def _record(self, path: Path, compiled: Any, args: Sequence[Any],
                cfg: Sequence[int]) -> None:
        """Record a kernel the JIT launched (once per process, where none is on disk)."""
        if path not in self._recorded and not path.exists():
            triton_binary.record(path, compiled, args, cfg, self._variant())
        self._recorded.add(path)

    def _variant(self) -> list[Any]:
        """What else picks the compiled form of this kernel in a configuration: its debug
        launch options."""
        return [bool(self.kernel.debug)]

    def _split(self, args: Sequence[Any]) -> None:
        if self.pending is not None:
            self.pending.wait()
            self.pending = None
        if self.config is None:
            self.config = self._tune(args)
        self._run_split(self.config, args, keep=True)

    def _split_plan(self, args: Sequence[Any]) -> tuple[Any, ...]:
        """What every launch of this split reduction computes alike (computed once)."""
        if self._split_consts is None:
            k = self.kernel
            first = next(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
            dtypes = tuple(getattr(torch, dt) for dt in k.workspaces)
            debug = dict(LAUNCH_DEBUG) if k.debug else {}
            self._split_consts = (k.xnumel * k.split, dtypes, first, self._final_config(),
                                  debug)
        return self._split_consts

    def _run_split(self, cfg: tuple[int, int, int], args: Sequence[Any],
                   keep: bool = False) -> None:
        """A split reduction: each program's partials of its chunk of a block of rows into
        fresh workspaces (`[rows, split]`), then the final kernel over blocks of rows."""
        k = self.kernel
        numel, dtypes, first, final, debug = self._split_plan(args)
        device = args[first].device
        full = (*args, *[torch.empty(numel, dtype=dt, device=device) for dt in dtypes])
        xb, rb, warps = cfg
        grid = (k.split, _cdiv(k.xnumel, xb))
        if not (keep and (self.fast.call(full) or self._launch_recorded(
                self.fast, self.record, full, cfg, grid))):
            if k.interpret:
                self.fn[grid](*full, XBLOCK=xb, RBLOCK=rb)
            else:
                c = self.fn[grid](*full, XBLOCK=xb, RBLOCK=rb, num_warps=warps, **debug)
                if keep:
                    self.fast.keep(c, grid, full, (xb, rb))
                    self._record(self.record, c, full, cfg)
        fxb, frb, fgrid, fwarps = final
        fcfg = (fxb, frb, fwarps)
        if not (keep and (self.fast_final.call(full) or self._launch_recorded(
                self.fast_final, self.record_final, full, fcfg, fgrid))):
            if k.interpret:
                self.final[fgrid](*full, XBLOCK=fxb, RBLOCK=frb)
            else:
                c = self.final[fgrid](*full, XBLOCK=fxb, RBLOCK=frb, num_warps=fwarps,
                                      **debug)
                if keep:
                    self.fast_final.keep(c, fgrid, full, (fxb, frb))
                    self._record(self.record_final, c, full, fcfg)

    def _tune(self, args: Sequence[Any],
              configs: tuple[tuple[int, int, int], ...] | None = None,
              numels: tuple[int, int] | None = None) -> tuple[int, int, int]:
        k = self.kernel
        symbolic = configs is not None
        configs = configs if configs is not None else k.configs
        if (k.interpret or len(configs) == 1 or k.inplace or not config.options.triton_autotune
                or not torch.cuda.is_available() or overlapping(args)):
            return configs[0]
        times: list[tuple[float, tuple[int, int, int]]] = []
        run = self._run_split if k.split > 1 else self._run
        for cfg in configs:
            try:
                if symbolic:
                    self._run(cfg, args, numels)  # compile and warm up
                else:
                    run(cfg, args)
                start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                start.record()
                for _ in range(5):
                    if symbolic:
                        self._run(cfg, args, numels)
                    else:
                        run(cfg, args)
                end.record()
                end.synchronize()
                times.append((start.elapsed_time(end), cfg))
            except Exception as e:  # noqa: BLE001 - a config that does not compile is skipped
                log.info("triton config %s of %s failed: %s", cfg, k.name, e)
        if not times:
            return configs[0]
        best = min(times)[1]
        if symbolic:
            return best  # NOTE: per size bucket, in this process
        write_best(self.best_path, list(best))
        return best


class InterpretedLauncher(Launcher):
    """A launcher of a kernel Triton's interpreter runs: Triton must see the interpreter on
    while it runs, and not after (`runtime/triton_interp.py`)."""

    def __call__(self, *args: Any) -> None:
        with interpreting():
            super().__call__(*args)


def kernel_paths(kernel: TritonKernel) -> tuple[Path, Path]:
    """The kernel's module (written to `cache_dir/triton`) and the path of its tuning record
    (`<name>.best`)."""
    directory = _module_dir()
    path = directory / f"{kernel.name}.py"
    _write(path, kernel.source)
    return path, directory / f"{kernel.name}.best"


def kernel_module(kernel: TritonKernel) -> tuple[Any, Path]:
    """The kernel's module (written to `cache_dir/triton` and imported) and the path of its
    tuning record (`<name>.best`)."""
    path, best = kernel_paths(kernel)
    return _import(kernel, path), best


def write_best(path: Path, choice: list[Any]) -> None:
    """Record a tuning result beside its kernel (best effort: a read-only cache keeps none)."""
    try:
        _write(path, json.dumps(choice))
    except OSError:
        pass


_key_thread: threading.Thread | None = None


def _start_triton_key() -> None:
    """Compute Triton's own cache key in a background thread (once per process).

    NOTE: the JIT's first compile or cache lookup in a process hashes Triton's sources and
    libraries (`triton.runtime.cache.triton_key`, ~0.4 s on the GPU box: a third of a warm
    GPT-2 training start), then keeps it. Hashing and file reads release the GIL, so the
    thread overlaps the loading and first steps of the graph before its first Triton launch.
    """
    global _key_thread
    if _key_thread is not None:
        return
    try:
        from triton.runtime.cache import triton_key  # type: ignore[import-untyped]
    except ImportError:
        return
    _key_thread = threading.Thread(target=triton_key, name="triton-key", daemon=True)
    _key_thread.start()


def load_triton_kernels(kernels: Sequence[TritonKernel]) -> dict[str, Any]:
    """Kernel name -> its launcher (module written to `cache_dir/triton`, imported once per
    process when a launch needs the JIT)."""
    directory = _module_dir()
    if any(not k.interpret and not (directory / f"{k.name}.bin").exists() for k in kernels):
        _start_triton_key()  # NOTE: a kernel the JIT will look up (no record of it)
    out: dict[str, Any] = {}
    for k in kernels:
        with _lock:
            launcher = _launchers.get(k.name)
            if launcher is None:
                cls = InterpretedLauncher if k.interpret else Launcher
                launcher = cls(k, *kernel_paths(k))
                _launchers[k.name] = launcher
        out[k.name] = launcher
    return out


def clear_launchers() -> None:
    """Forget imported kernels (tests of the warm start)."""
    with _lock:
        _launchers.clear()
