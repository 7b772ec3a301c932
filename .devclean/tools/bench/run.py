"""Run the benchmarks in this folder: `hatch run bench [name ...]`.

Each benchmark is a module `tools/bench/<name>.py` with a `main(argv: list[str]) -> int`.
With no names, every benchmark runs in turn. Benchmarks print ratios against eager and
against `torch.compile`, measured side by side in one run.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.py") if p.stem not in {"run", "__init__"}
                  and not p.stem.startswith("_"))


def run_one(name: str, argv: list[str]) -> int:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"no benchmark named {name!r}; available: {', '.join(available())}")
    module = importlib.util.module_from_spec(spec)
    # NOTE: registered before running so dataclasses and pickling can find the module; the
    # folder itself is not put on sys.path, since guards.py there shares the package's name.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    print(f"===== bench {name}", flush=True)
    return int(module.main(argv))


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")]
    flags = [a for a in argv if a.startswith("-")]
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {', '.join(available())}")
        return 2
    status = 0
    for name in names or available():
        status |= run_one(name, flags)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
