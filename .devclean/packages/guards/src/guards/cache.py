"""The per-code-object cache: (guard tree, compiled entry) pairs tried most-recent-hit first.

Lookups are lock-free (they read an immutable tuple of entries); adding, removing, clearing
and moving a hit to the front take a lock and publish a new tuple. After
`cache_size_limit` entries, `add` refuses and `miss_report` says "limit reached" with every
entry's failure reason, so the caller can warn once and run eagerly.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import Generic, TypeVar

from guards import config
from guards.codegen import CompiledGuard, GuardFn, compile_guard
from guards.interpret import explain
from guards.tree import GuardTree

T = TypeVar("T")


class CacheLimitReached(RuntimeError):
    """Raised by `GuardCache.add` when the cache already holds `cache_size_limit` entries."""


class CacheEntry(Generic[T]):
    """One cached entry: the guard tree, its compiled check and the caller's compiled value."""

    __slots__ = ("__weakref__", "check", "check_args", "guard", "hits", "tree", "value")

    def __init__(self, tree: GuardTree, guard: CompiledGuard, value: T) -> None:
        self.tree = tree
        self.guard = guard
        #: The raw generated function, `check(L, G) -> bool`.
        self.check: GuardFn = guard.fn
        #: The positional variant `check_args(*locals, G) -> bool` (locals in
        #: `guard.arg_names` order), when the guard was compiled with `arg_names`; else None.
        self.check_args: Callable[..., bool] | None = guard.fn_args
        self.value = value
        self.hits = 0

    def __repr__(self) -> str:
        return f"CacheEntry(checks={self.tree.count_checks()}, hits={self.hits})"


@dataclass(frozen=True, slots=True)
class MissReport:
    """Why a lookup missed: each entry's failure reason (most-recent first), whether the
    cache is full, and `first_limit_report` (True only the first time a full cache is
    reported, so the caller warns once)."""

    reasons: tuple[str, ...]
    limit_reached: bool
    first_limit_report: bool
    limit: int

    def message(self) -> str:
        """One text for logs: the reasons, and the limit if reached."""
        lines = []
        if self.limit_reached:
            lines.append(f"cache_size_limit reached ({self.limit} entries); running eagerly. "
                         "Failure reasons of the cached entries:")
        for i, reason in enumerate(self.reasons):
            lines.append(f"  entry {i}: {reason}")
        return "\n".join(lines)


class GuardCache(Generic[T]):
    """Entries for one code object, tried most-recently-hit first. Thread-safe.

    Typical use by a caller::

        value = cache.lookup(L, G)
        if value is None:
            report = cache.miss_report(L, G)
            if report.limit_reached:
                if report.first_limit_report: warn(report.message())
                run eagerly
            else:
                log(report.message()); cache.add(tree, compiled)
    """

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        self._entries: tuple[CacheEntry[T], ...] = ()
        self._lock = threading.Lock()
        self._limit_reported = False

    @property
    def limit(self) -> int:
        """The size limit: the one given, else `GuardsConfig.cache_size_limit` now."""
        return self._limit if self._limit is not None else config.options.cache_size_limit

    @property
    def entries(self) -> tuple[CacheEntry[T], ...]:
        """The entries in lookup order (most recently hit first)."""
        return self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def lookup_entry(self, L: dict[str, object], G: dict[str, object]) -> CacheEntry[T] | None:
        """The first entry whose guard passes, moved to the front; None on a miss."""
        entries = self._entries
        for index, entry in enumerate(entries):
            if entry.check(L, G):
                entry.hits += 1
                if index:
                    self._move_to_front(entry)
                return entry
        return None

    def lookup(self, L: dict[str, object], G: dict[str, object]) -> T | None:
        """The value of the first entry whose guard passes; None on a miss."""
        entries = self._entries
        for index, entry in enumerate(entries):
            if entry.check(L, G):
                entry.hits += 1
                if index:
                    self._move_to_front(entry)
                return entry.value
        return None

    def _move_to_front(self, entry: CacheEntry[T]) -> None:
        with self._lock:
            rest = tuple(e for e in self._entries if e is not entry)
            if len(rest) != len(self._entries):
                self._entries = (entry,) + rest

    def miss_report(self, L: dict[str, object], G: dict[str, object]) -> MissReport:
        """Why every entry rejects (L, G), and whether the cache is full."""
        entries = self._entries
        reasons = tuple(explain(e.tree, L, G) or "guard passed on re-check (state changed "
                        "since the lookup)" for e in entries)
        full = len(entries) >= self.limit
        first = False
        if full:
            with self._lock:
                first = not self._limit_reported
                self._limit_reported = True
        return MissReport(reasons, full, first, self.limit)

    def add(self, tree: GuardTree, value: T, guard: CompiledGuard | None = None,
            arg_names: Sequence[str] | None = None) -> CacheEntry[T]:
        """Compile `tree` (unless `guard` is given; with `arg_names` the entry also gets the
        positional `check_args`) and put the entry first.

        Raises CacheLimitReached if the cache is full.
        """
        compiled = guard if guard is not None else compile_guard(tree, arg_names)
        entry = CacheEntry(tree, compiled, value)
        with self._lock:
            if len(self._entries) >= self.limit:
                raise CacheLimitReached(
                    f"cache_size_limit ({self.limit}) reached: {len(self._entries)} entries")
            self._entries = (entry,) + self._entries
        return entry

    def remove(self, entry: CacheEntry[T]) -> bool:
        """Remove `entry`; False if it was not there."""
        with self._lock:
            rest = tuple(e for e in self._entries if e is not entry)
            found = len(rest) != len(self._entries)
            self._entries = rest
            if found:
                self._limit_reported = False
        return found

    def clear(self) -> None:
        """Remove every entry (and forget that the limit was reported)."""
        with self._lock:
            self._entries = ()
            self._limit_reported = False


_CACHES: weakref.WeakKeyDictionary[CodeType, GuardCache[object]] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_for(code: CodeType) -> GuardCache[object]:
    """The cache of `code` (created on first use). Held weakly by the code object."""
    cache = _CACHES.get(code)
    if cache is None:
        with _CACHES_LOCK:
            cache = _CACHES.get(code)
            if cache is None:
                cache = GuardCache()
                _CACHES[code] = cache
    return cache


def clear_all_caches() -> None:
    """Empty every code object's cache (for `reset`)."""
    with _CACHES_LOCK:
        caches = list(_CACHES.values())
    for cache in caches:
        cache.clear()
