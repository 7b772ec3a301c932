"""`python -m guards.native`: build the native checker now (blocking) and say where it is.

Optional: without it, the first process that compiles a guard with tensor checks starts the
build in the background (see `guards.native`) and its early guards stay pure Python. Run it
once after installing (or after upgrading torch, Python or the compiler) so that the first
process loads the cached build instead. Prints the shared object's path and the time taken;
exits 1, saying why, if the checker cannot be built.

`--background` is the detached build that `load_native()` starts (`build.start_background`):
it builds the given key into the given cache directory and prints only what went wrong.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time


def _background(cache_dir: str, cxx: str, key: str) -> int:
    """The detached build: 0 once the cached file for `key` imports, else 1 (or 2)."""
    from guards.native.build import NativeBuildError, build_and_load, plan_build

    directory = pathlib.Path(cache_dir)
    try:
        plan = plan_build(directory, cxx)
        if plan.key != key:
            print(f"this process plans key {plan.key}, not {key} (another torch, Python or "
                  "compiler?)", file=sys.stderr)
            return 2
        build_and_load(directory, cxx)
    except NativeBuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


def _build_now() -> int:
    """Build (or load the cached build) in this process; print where and how long."""
    from guards.native import load_native, native_status
    from guards.native.build import NativeBuildError, plan_build

    try:
        cached = plan_build().path.exists()  # NOTE: imports torch, not counted below
    except NativeBuildError as exc:
        print(f"guards: native checker unavailable: {exc}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    module = load_native(wait=True)
    seconds = time.perf_counter() - start
    if module is None:
        print(f"guards: native checker {native_status()}", file=sys.stderr)
        return 1
    how = "already built; loaded" if cached else "built"
    print(f"guards: native checker {module.__file__} ({how} in {seconds:.1f} s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line entry (see the module doc); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m guards.native",
                                     description="Build the guards' native checker now.")
    parser.add_argument("--background", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    parser.add_argument("--cxx", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.background:
        if not (args.cache_dir and args.cxx and args.key):
            parser.error("--background needs --cache-dir, --cxx and --key")
        return _background(args.cache_dir, args.cxx, args.key)
    return _build_now()


if __name__ == "__main__":
    sys.exit(main())
