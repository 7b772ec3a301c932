"""The per-code cache: most-recent-hit order, the size limit with reasons, removal, clearing,
and concurrent lookups."""

from __future__ import annotations

import threading

import pytest
from guards import (
    CacheLimitReached,
    EqualsMatch,
    GuardBuilder,
    GuardCache,
    GuardTree,
    LocalSource,
    cache_for,
    clear_all_caches,
    config,
)


def _tree(n: int) -> GuardTree:
    return GuardBuilder().add(LocalSource("n"), EqualsMatch(n)).build()


def test_lookup_hits_and_mru_order() -> None:
    cache: GuardCache[str] = GuardCache(limit=4)
    for n in range(3):
        cache.add(_tree(n), f"entry{n}")
    assert [e.value for e in cache.entries] == ["entry2", "entry1", "entry0"]
    assert cache.lookup({"n": 0}, {}) == "entry0"
    assert [e.value for e in cache.entries] == ["entry0", "entry2", "entry1"]
    assert cache.lookup({"n": 7}, {}) is None
    entry = cache.lookup_entry({"n": 1}, {})
    assert entry is not None and entry.value == "entry1" and entry.hits == 1


def test_limit_reached_reports_every_reason_once() -> None:
    cache: GuardCache[str] = GuardCache(limit=2)
    cache.add(_tree(0), "a")
    report = cache.miss_report({"n": 5}, {})
    assert not report.limit_reached and report.reasons == ("L['n'] == 0 failed: got 5",)
    cache.add(_tree(1), "b")
    with pytest.raises(CacheLimitReached):
        cache.add(_tree(2), "c")
    report = cache.miss_report({"n": 5}, {})
    assert report.limit_reached and report.first_limit_report
    assert report.reasons == ("L['n'] == 1 failed: got 5", "L['n'] == 0 failed: got 5")
    assert "cache_size_limit reached (2 entries)" in report.message()
    assert not cache.miss_report({"n": 5}, {}).first_limit_report
    assert cache.lookup({"n": 0}, {}) == "a"  # hits still work when full


def test_remove_clear_and_default_limit() -> None:
    cache: GuardCache[str] = GuardCache()
    assert cache.limit == 8
    with config.patch(cache_size_limit=1):
        assert cache.limit == 1
    entry = cache.add(_tree(0), "a")
    assert cache.remove(entry) and not cache.remove(entry)
    cache.add(_tree(1), "b")
    cache.clear()
    assert len(cache) == 0 and cache.lookup({"n": 1}, {}) is None


def test_cache_per_code_object() -> None:
    def f() -> None: ...

    def g() -> None: ...

    cache = cache_for(f.__code__)
    assert cache_for(f.__code__) is cache and cache_for(g.__code__) is not cache
    cache.add(_tree(0), "a")
    clear_all_caches()
    assert len(cache_for(f.__code__)) == 0


def test_concurrent_lookups_and_adds() -> None:
    cache: GuardCache[int] = GuardCache(limit=64)
    for n in range(8):
        cache.add(_tree(n), n)
    errors: list[str] = []

    def reader(seed: int) -> None:
        for i in range(3000):
            n = (i * 7 + seed) % 8
            if cache.lookup({"n": n}, {}) != n:
                errors.append(f"lookup {n} missed")

    def writer() -> None:
        for n in range(100, 140):
            entry = cache.add(_tree(n), n)
            cache.remove(entry)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(e.value for e in cache.entries) == list(range(8))


def test_positional_check_args() -> None:
    cache: GuardCache[str] = GuardCache(limit=4)
    plain = cache.add(_tree(1), "plain")
    assert plain.check_args is None
    entry = cache.add(_tree(2), "positional", arg_names=("n", "unused"))
    assert entry.check_args is not None
    assert entry.check_args(2, object(), {}) is True
    assert entry.check_args(3, object(), {}) is False
    absent = cache.add(_tree(2), "absent", arg_names=("m",))
    assert absent.check_args is not None and absent.check_args(2, {}) is False  # no local n
