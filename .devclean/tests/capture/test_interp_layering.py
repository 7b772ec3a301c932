"""capture imports one way: no import cycle between its modules (the interpreter's, and those
of the whole package: values, output_graph, side_effects, torch_ops, frame...), counting
imports made inside functions (tools/import_cycles.py builds the graph with `ast`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("import_cycles",
                                                  ROOT / "tools" / "import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_interp_has_no_import_cycle():
    tool = _tool()
    runtime, _ = tool.import_graph(ROOT / "packages/capture/src/capture/interp")
    assert "capture.interp.dispatch" in runtime
    assert tool.cycles(runtime) == []


def test_capture_has_no_import_cycle():
    tool = _tool()
    runtime, _ = tool.import_graph(ROOT / "packages/capture/src/capture")
    assert "capture.output_graph" in runtime and "capture.interp.translator" in runtime
    assert tool.cycles(runtime) == []
    # NOTE: the layers below the interpreter do not reach up into it.
    for low in ("capture.values.base", "capture.values.tensor", "capture.side_effects",
                "capture.output_graph", "capture.torch_ops"):
        assert not any(m.startswith("capture.interp") for m in runtime[low]), low


def test_the_checker_finds_a_cycle_held_by_an_import_inside_a_function(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from pkg.a import thing\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from pkg import a\n")
    tool = _tool()
    runtime, typing_only = tool.import_graph(package)
    assert tool.cycles(runtime) == [["pkg.a", "pkg.b"]]
    assert typing_only["pkg.c"] == {"pkg.a"}
