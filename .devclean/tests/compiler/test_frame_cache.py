"""The frame disk cache (issue 15 point 3, `compiler.frame_cache`): a warm process installs
whole compiled frames recorded by an earlier one, without capture (and so without torch's
fake tensors, which import `torch._dynamo`), with eager's results; a global, an attribute or
an inlined function's code changed between processes is captured again, never reused; a
damaged record is a miss.

Each run is a fresh process (`_frame_driver.py`); the portable guard trees are also checked
in this process (`compiler.portable_guards`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

DRIVER = Path(__file__).with_name("_frame_driver.py")
BACKENDS = ["aot_eager", "inductor"]


def run(backend: str, cache: Path, **env: str) -> dict[str, Any]:
    request = {"backend": backend, "cache": str(cache)}
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("FRAME_") and k not in ("AOTGRAD_GRAPH_CACHE",
                                                          "CAPTURE_FRAME_DISK_CACHE")}
    environ.update(INDUCTOR_CACHE_DIR=str(cache), AOTGRAD_DISK_CACHE="1", **env)
    done = subprocess.run([sys.executable, str(DRIVER), json.dumps(request)],
                          capture_output=True, text=True, env=environ, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


@pytest.fixture(scope="module", params=BACKENDS)
def warm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
         ) -> tuple[str, Path]:
    backend = str(request.param)
    cache = tmp_path_factory.mktemp(f"frames-{backend}")
    cold = run(backend, cache)
    assert cold["same"]
    assert cold["from_disk"] == {"module": [False], "function": [False]}, cold
    assert cold["traced"], cold
    return backend, cache


def private_copy(cache: Path, tmp_path: Path) -> Path:
    target = tmp_path / "cache"
    shutil.copytree(cache, target, symlinks=True)
    return target


def test_warm_process_skips_capture(warm: tuple[str, Path], tmp_path: Path) -> None:
    backend, cache = warm
    again = run(backend, private_copy(cache, tmp_path))
    assert again["same"]
    assert again["from_disk"] == {"module": [True], "function": [True]}, again
    assert again["traced"] == [], again
    # NOTE: nothing made a fake tensor: torch._dynamo was never imported
    assert not again["dynamo_imported"]


@pytest.mark.parametrize(("env", "module_again", "function_again"), [
    ({"FRAME_SCALE": "3.0"}, True, True),        # a global both frames read
    ({"FRAME_ALPHA": "0.25"}, True, False),      # an attribute of the module
    ({"FRAME_HELPER": "other"}, True, False),    # the code of a function forward inlines
    ({"FRAME_NOGRAD": "1"}, True, False),        # grad mode
])
def test_changed_state_is_captured_again(warm: tuple[str, Path], tmp_path: Path,
                                         env: dict[str, str], module_again: bool,
                                         function_again: bool) -> None:
    backend, cache = warm
    other = run(backend, private_copy(cache, tmp_path), **env)
    assert other["same"], other
    assert other["from_disk"]["module"] == [not module_again], other
    assert other["from_disk"]["function"] == [not function_again], other


def test_signature_the_guards_do_not_check_runs_eagerly(warm: tuple[str, Path],
                                                        tmp_path: Path) -> None:
    # NOTE: a non-leaf input that requires grad passes the recorded guards (requires_grad,
    # sizes, strides) but is another aotgrad signature: the graph's code runs eagerly
    backend, cache = warm
    other = run(backend, private_copy(cache, tmp_path), FRAME_NONLEAF="1")
    assert other["same"], other


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_damaged_records_are_misses(warm: tuple[str, Path], tmp_path: Path,
                                    damage: str) -> None:
    backend, cache = warm
    private = private_copy(cache, tmp_path)
    for path in sorted((private / "graphs").glob("graph_*.bin")):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if damage == "truncated" else
                         os.urandom(len(data)))
    again = run(backend, private)
    assert again["same"]
    assert again["from_disk"] == {"module": [False], "function": [False]}, again
    rebuilt = run(backend, private)
    assert rebuilt["same"] and rebuilt["from_disk"] == {"module": [True], "function": [True]}


def test_switched_off(warm: tuple[str, Path], tmp_path: Path) -> None:
    backend, cache = warm
    off = run(backend, private_copy(cache, tmp_path), CAPTURE_FRAME_DISK_CACHE="0")
    assert off["same"] and off["from_disk"] == {"module": [False], "function": [False]}


# --------------------------------------------------------------------------- in process


class Holder:
    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.scale = 2


def _tree(holder: Holder, extra: object) -> tuple[Any, dict[str, object]]:
    import guards
    from guards.sources import AttrSource, LocalSource

    builder = guards.GuardBuilder()
    builder.add_global(guards.GlobalStateMatch.current())
    h = LocalSource("h")
    builder.add(h, guards.IdMatch.of(holder))
    builder.add(AttrSource(h, "inner"), guards.IdMatch.of(holder.inner))
    builder.add(AttrSource(h, "scale"), guards.EqualsMatch(holder.scale))
    builder.add(LocalSource("e"), guards.IdMatch.of(extra))
    builder.add(LocalSource("t"), guards.TensorMatch.from_tensor(torch.ones(2, 3)))
    return builder.build(), {"h": holder, "e": extra, "t": torch.zeros(2, 3)}


def test_portable_tree_rebuilt_for_new_objects() -> None:
    import guards
    from compiler import portable_guards

    shared = Holder(None)
    tree, _ = _tree(Holder(shared), torch.relu)
    data = portable_guards.encode(tree)
    fresh = Holder(Holder(None))
    L: dict[str, object] = {"h": fresh, "e": torch.relu, "t": torch.zeros(2, 3)}
    rebuilt = portable_guards.decode(data, L, {})
    assert guards.interpret(rebuilt, L, {}) is None
    # NOTE: the rebuilt tree checks identity of the objects found in this process
    assert guards.interpret(rebuilt, {**L, "h": Holder(Holder(None))}, {}) is not None
    fresh.scale = 3
    assert guards.interpret(portable_guards.decode(data, L, {}), L, {}) is not None


def test_portable_tree_refuses_other_objects() -> None:
    from compiler import portable_guards

    tree, _ = _tree(Holder(Holder(None)), torch.relu)
    data = portable_guards.encode(tree)
    with pytest.raises(portable_guards.NotPortable):  # another function than recorded
        portable_guards.decode(data, {"h": Holder(Holder(None)), "e": torch.tanh,
                                      "t": torch.zeros(2, 3)}, {})
    with pytest.raises(portable_guards.NotPortable):  # another class
        portable_guards.decode(data, {"h": Holder(object()), "e": torch.relu,
                                      "t": torch.zeros(2, 3)}, {})
    same = Holder(None)
    same.inner = same
    with pytest.raises(portable_guards.NotPortable):  # one object where there were two
        portable_guards.decode(data, {"h": same, "e": torch.relu, "t": torch.zeros(2, 3)}, {})


def test_local_objects_are_not_portable() -> None:
    from compiler import portable_guards

    def local(x: torch.Tensor) -> torch.Tensor:
        return x

    tree, _ = _tree(Holder(Holder(None)), local)
    with pytest.raises(portable_guards.NotPortable):
        portable_guards.encode(tree)


def my_relu(x: torch.Tensor) -> torch.Tensor:
    return x.clamp_min(0)


def test_an_object_put_in_anothers_place_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # NOTE: `torch.relu = my_relu` in the new process: found under the recorded name, but it
    # is not the recorded object (it names itself otherwise)
    import guards
    from compiler import portable_guards
    from guards.sources import AttrSource, ConstSource

    source = AttrSource(ConstSource.of(torch), "relu")
    builder = guards.GuardBuilder()
    builder.add(source, guards.IdMatch.of(torch.relu))
    data = portable_guards.encode(builder.build())
    assert guards.interpret(portable_guards.decode(data, {}, {}), {}, {}) is None
    monkeypatch.setattr(torch, "relu", my_relu)
    with pytest.raises(portable_guards.NotPortable):
        portable_guards.decode(data, {}, {})
