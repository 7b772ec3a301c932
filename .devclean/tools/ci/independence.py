"""Install each package alone into a fresh virtual environment and run its own tests there.

Each package gets a new venv containing only the package, its declared dependencies (other
packages of this repo among them, installed from their folders, not editable) and its `test`
extra. torch is installed once into a shared base venv and made visible to the package venvs
through a `.pth` file, so it is neither downloaded nor unpacked per package.

Usage: python tools/ci/independence.py [package ...]   (default: all five)
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORK = ROOT / ".cache" / "independence"
TORCH_REQUIREMENT = "torch==2.13.0"

# folder -> (test folder, repo packages it depends on, needs torch)
PACKAGES: dict[str, tuple[str, list[str], bool]] = {
    "guards": ("guards", [], True),  # torch only through its `test` extra (tensor guards)
    "capture": ("capture", ["guards"], True),
    "aotgrad": ("aotgrad", [], True),
    "inductor": ("inductor", ["aotgrad"], True),
    "compiler-api": ("compiler", ["guards", "capture", "aotgrad", "inductor"], True),
}


def run(cmd: list[str], **kwargs: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]


def venv_python(venv: pathlib.Path) -> pathlib.Path:
    return venv / "bin" / "python"


def site_packages(venv: pathlib.Path) -> pathlib.Path:
    out = subprocess.run(
        [str(venv_python(venv)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    )
    return pathlib.Path(out.stdout.strip())


def torch_base() -> pathlib.Path:
    base = WORK / "torch-base"
    marker = base / ".ready"
    if not marker.exists():
        shutil.rmtree(base, ignore_errors=True)
        run([sys.executable, "-m", "venv", str(base)])
        run([str(venv_python(base)), "-m", "pip", "install", "-q", TORCH_REQUIREMENT])
        marker.write_text("ok\n")
    return base


def check(folder: str) -> bool:
    tests, deps, needs_torch = PACKAGES[folder]
    venv = WORK / f"venv-{folder}"
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(venv)])
    if needs_torch:
        (site_packages(venv) / "torch_base.pth").write_text(f"{site_packages(torch_base())}\n")
    py = str(venv_python(venv))
    targets = [str(ROOT / "packages" / d) for d in deps] + [f"{ROOT / 'packages' / folder}[test]"]
    run([py, "-m", "pip", "install", "-q", *targets])
    result = subprocess.run(
        [py, "-m", "pytest", "-q", "-n", "auto", "-p", "no:cacheprovider", f"tests/{tests}"], cwd=ROOT,
        check=False,
    )
    # pytest exits 5 when a folder holds no tests yet: a package with no code has none.
    ok = result.returncode in (0, 5)
    print(f"== independence {folder}: {'ok' if ok else 'FAILED'}", flush=True)
    return ok


def main(argv: list[str]) -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    names = argv or list(PACKAGES)
    failed = [name for name in names if not check(name)]
    if failed:
        print(f"independence check failed for: {', '.join(failed)}")
        return 1
    print(f"independence check passed for: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
