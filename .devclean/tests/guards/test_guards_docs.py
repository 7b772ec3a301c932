"""Everything public in `guards` has a docstring (inherited ones count for overrides)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import guards


def test_public_names_are_documented() -> None:
    missing = []
    for info in pkgutil.iter_modules(guards.__path__):
        module = importlib.import_module(f"guards.{info.name}")
        if not module.__doc__:
            missing.append(module.__name__)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not inspect.getdoc(obj):
                missing.append(f"{module.__name__}.{name}")
            if inspect.isclass(obj):
                for attr in vars(obj):
                    member = getattr(obj, attr)
                    if attr.startswith("_") or not callable(member):
                        continue
                    if not inspect.getdoc(member):
                        missing.append(f"{module.__name__}.{name}.{attr}")
    assert not missing, missing


def test_all_is_exported() -> None:
    for name in guards.__all__:
        assert hasattr(guards, name), name
        assert name == "__version__" or inspect.getdoc(getattr(guards, name)), name
