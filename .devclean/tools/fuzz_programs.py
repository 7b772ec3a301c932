"""Run N random generated programs per backend against eager and report how many are wrong.

Usage: python tools/fuzz_programs.py [-n 200] [--seed 0] [--backends eager,aot_eager,inductor]
                                     [--show 3] [--out DIR]

Each program (tests/compiler/_program_gen.py) is run eagerly and through each backend for
several calls with Python state changed between them; a program is "wrong" when a result,
an argument, a global, an attribute, a container, grad mode, aliasing, a gradient or the
raised exception's type differs from eager. The first `--show` failing programs per backend
are printed as standalone reproducers (and written under --out if given).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import pathlib
import re
import resource
import signal
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "compiler"))

from _program_gen import Draw, Program, generate
from _program_run import check, reproducer


class _Timeout(BaseException):  # NOTE: not swallowed by the recorder's `except Exception`
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout


def _check_with_timeout(program: Program, backend: str, seconds: int) -> list[str]:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        return check(program, backend)
    except _Timeout:
        return [f"timed out after {seconds} s (eager and compiled run together)"]
    except MemoryError:
        return ["ran out of memory (eager and compiled run together)"]
    finally:
        signal.alarm(0)


def _kind(difference: str) -> str:
    """'call 2 state K.registry: length ...' -> 'state K.registry' (what differs, not how)."""
    head = difference.split(":")[0]
    words = head.split(" ")
    return " ".join(words[2:]) if words[0] == "call" else head


def _blocks(body: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) of each statement with its indented block, the return excluded."""
    out = []
    for i, line in enumerate(body[:-1]):
        depth = len(line) - len(line.lstrip())
        end = i + 1
        while end < len(body) - 1 and len(body[end]) - len(body[end].lstrip()) > depth:
            end += 1
        if line.strip() not in ("else:",):
            out.append((i, end))
    return out


def _valid(program: Program) -> bool:
    try:
        compile(program.source, "<candidate>", "exec")
    except SyntaxError:
        return False
    return True


def _candidates(p: Program) -> list[Program]:
    """Smaller or plainer variants of `p`, most reducing first."""
    out = []
    for i in range(len(p.calls) - 1, -1, -1):
        if len(p.calls) > 1:
            out.append(dataclasses.replace(p, calls=p.calls[:i] + p.calls[i + 1:]))
    for start, end in sorted(_blocks(p.body), key=lambda b: b[0] - b[1]):
        out.append(dataclasses.replace(p, body=p.body[:start] + p.body[end:]))
        if end - start > 1:  # keep the block's body, drop its header (one level less)
            inner = tuple(line[4:] for line in p.body[start + 1:end])
            out.append(dataclasses.replace(p, body=p.body[:start] + inner + p.body[end:]))
    for i, c in enumerate(p.calls):
        for j in range(len(c.changes)):
            smaller = dataclasses.replace(c, changes=c.changes[:j] + c.changes[j + 1:])
            out.append(dataclasses.replace(p, calls=p.calls[:i] + (smaller,) + p.calls[i + 1:]))
        for field, value in (("alias", "distinct"), ("fresh_obj", False), ("grad", True),
                             ("lst_len", 1), ("lst_alias", False)):
            if getattr(c, field) != value:
                plainer = dataclasses.replace(c, **{field: value})
                out.append(dataclasses.replace(
                    p, calls=p.calls[:i] + (plainer,) + p.calls[i + 1:]))
    if p.grad_mode != "none":
        out.append(dataclasses.replace(p, grad_mode="none"))
    return [c for c in out if _valid(c)]


def minimize(program: Program, backend: str, differences: list[str],
             budget: int = 200) -> tuple[Program, list[str]]:
    """Greedily shrink a failing program while a difference of the same kind persists."""
    kind = _kind(differences[0])
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in _candidates(program):
            tries += 1
            diffs = check(candidate, backend)
            if any(_kind(d) == kind for d in diffs):
                program, differences = candidate, diffs
                improved = True
                break
            if tries >= budget:
                break
    return program, differences


def main(argv: list[str]) -> int:
    """Run the fuzzer; exit status 1 when any program is wrong on any backend."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100, help="programs per backend")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first program")
    parser.add_argument("--backends", default="eager,aot_eager,inductor")
    parser.add_argument("--show", type=int, default=3, help="failing sources printed per backend")
    parser.add_argument("--out", type=pathlib.Path, default=None,
                        help="write every failing reproducer to this folder")
    parser.add_argument("--minimize", action="store_true",
                        help="shrink each shown failing program before printing it")
    parser.add_argument("--only", type=int, default=None, help="run just this seed")
    parser.add_argument("--skip-containing", action="append", default=[], metavar="TEXT",
                        help="skip programs whose source contains TEXT (to look past a known "
                             "bug; reported as skipped); repeatable")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress per program")
    parser.add_argument("--timeout", type=int, default=120,
                        help="seconds per program and backend before it counts as a hang")
    parser.add_argument("--max-gb", type=float, default=6.0,
                        help="address-space limit of this process (a runaway program fails)")
    args = parser.parse_args(argv)
    if not args.verbose:
        # NOTE: recompiles and eager fallbacks are expected here; only differences matter.
        logging.getLogger("capture").setLevel(logging.ERROR)
    limit = int(args.max_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    backends = args.backends.split(",")
    wrong = {b: 0 for b in backends}
    kinds: dict[str, dict[str, int]] = {b: {} for b in backends}
    shown = {b: 0 for b in backends}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    skipped = 0
    seeds = [args.only] if args.only is not None else [args.seed + i for i in range(args.n)]
    for i, seed in enumerate(seeds):
        program = generate(Draw.seeded(seed))
        if any(text in program.source for text in args.skip_containing):
            skipped += 1
            continue
        for b in backends:
            diffs = _check_with_timeout(program, b, args.timeout)
            if not diffs:
                continue
            wrong[b] += 1
            raised = re.match(r"call \d+: exception \w+ != eager None", diffs[0])
            kind = "raised where eager did not" if raised else "wrong"
            kinds[b][kind] = kinds[b].get(kind, 0) + 1
            if shown[b] >= args.show and args.out is None:
                continue
            if args.minimize:
                program_shown, diffs = minimize(program, b, diffs)
            else:
                program_shown = program
            text = reproducer(program_shown, b, diffs)
            if args.out is not None:
                (args.out / f"{b}_seed{seed}.py").write_text(text)
            if shown[b] < args.show:
                shown[b] += 1
                print(f"# ===== {b}, seed {seed}\n{text}", flush=True)
        if args.verbose or (i + 1) % 10 == 0:
            print(f"... {i + 1}/{len(seeds)} programs, wrong so far: {wrong} "
                  f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    print(f"\n{len(seeds)} programs per backend (seeds {seeds[0]}..{seeds[-1]}), "
          f"{time.perf_counter() - start:.0f} s"
          + (f"; {skipped} skipped by --skip-containing" if skipped else ""))
    for b in backends:
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(kinds[b].items()))
        print(f"  {b:10s} wrong: {wrong[b]:4d} / {len(seeds) - skipped}" + (f"   ({detail})" if detail else ""))
    return 1 if any(wrong.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
