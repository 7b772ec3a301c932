"""compiler.config: one front door over the packages' options."""

from __future__ import annotations

import compiler
import pytest


def test_lists_every_package_option_with_help():
    import aotgrad.config
    import capture
    import guards.config
    import inductor.config

    options = compiler.config.list_options()
    expected = (
        {f"capture.{k}" for k in capture.config.list_options()}
        | {f"guards.{k}" for k in guards.config.list_options()}
        | {f"aotgrad.{k}" for k in aotgrad.config.list_options()}
        | {f"inductor.{k}" for k in inductor.config.list_options()}
    )
    assert set(options) == expected
    assert all(isinstance(v, str) and v for v in options.values())


def test_get_and_as_dict_agree():
    values = compiler.config.as_dict()
    assert set(values) == set(compiler.config.list_options())
    for name in ("capture.verbose", "inductor.fusion"):
        assert compiler.config.get(name) == values[name]


def test_patch_qualified_and_restores():
    import capture

    before = capture.config.options.verbose
    with compiler.config.patch({"capture.verbose": not before}):
        assert capture.config.options.verbose is (not before)
        assert compiler.config.get("capture.verbose") is (not before)
    assert capture.config.options.verbose is before


def test_patch_short_name_and_several_packages():
    from inductor import config as inductor_config

    fusion = inductor_config.options.fusion
    with compiler.config.patch({"inductor.fusion": not fusion}, verbose=True):
        assert inductor_config.options.fusion is (not fusion)
        assert compiler.config.get("verbose") is True
    assert inductor_config.options.fusion is fusion
    assert compiler.config.get("verbose") is False


def test_patch_restores_on_exception():
    from guards import config as guards_config

    before = guards_config.options.cache_size_limit
    with pytest.raises(ZeroDivisionError), compiler.config.patch(
        {"guards.cache_size_limit": before + 3}
    ):
        assert guards_config.options.cache_size_limit == before + 3
        raise ZeroDivisionError
    assert guards_config.options.cache_size_limit == before


def test_unknown_option_suggests_close_names():
    with pytest.raises(ValueError) as info, compiler.config.patch({"capture.verbos": True}):
        pass
    assert "'capture.verbose'" in str(info.value)


def test_wrong_types():
    with pytest.raises(TypeError, match="'name'"):
        compiler.config.get(3)
    with pytest.raises(TypeError, match="'changes'"), compiler.config.patch(
        [("capture.verbose", True)]
    ):
        pass
    with pytest.raises(TypeError, match="cache_size_limit"), compiler.config.patch(
        {"guards.cache_size_limit": "8"}
    ):
        pass


def test_verbose_through_the_front_door_prints_graph_guards_bytecode(capsys):
    import torch

    compiler.reset()
    fast = compiler.compile(lambda x: torch.tanh(x) * 3, backend="eager")
    with compiler.config.patch(verbose=True):
        fast(torch.ones(2))
    out = capsys.readouterr().out
    assert "tanh" in out and "L['x']" in out and "LOAD_FAST" in out
