"""Guard tree evaluator: decides fast whether a compiled entry is valid, and says why not.

Build a tree of guards over the sources of a frame's values, compile it into one Python
function `check(L, G) -> bool` (L: the call's locals by name, G: the function's globals),
explain failures in words, and keep compiled entries per code object in a bounded cache.

    from guards import GuardBuilder, LocalSource, TensorMatch, compile_guard, explain
    b = GuardBuilder()
    b.add(LocalSource("x"), TensorMatch.from_tensor(x))
    tree = b.build()
    check = compile_guard(tree).fn
    check({"x": x}, globals())            # True
    explain(tree, {"x": x.double()}, {})  # "tensor L['x'] dtype mismatch: ..."

Torch is imported only when tensor or global-state checks are built or compiled. The
generated function hands its tensor, global-state and backend checks to a native checker
(C++, `guards.native`, built with g++ in the background on first use and cached on disk;
`python -m guards.native` builds it now); until it is built, where it cannot be built, or
with `GUARDS_NATIVE=0`, they stay generated Python.

Public names:
- sources: Source, LocalSource, GlobalSource, AttrSource, ItemSource, SizeSource,
  StrideSource, ClosureSource, DefaultSource, ParamSource, BufferSource, SubmoduleSource,
  ConstSource (a fixed object: class, module dict, function), CallSource (`x.storage_offset()`)
- checks: Check, TypeMatch, IdMatch, EqualsMatch, LengthMatch, DictKeysMatch, NotNone,
  KeyAbsent, TensorMatch, GlobalStateMatch, BackendMatch
- aliasing: GuardBuilder.add_aliasing (AliasCheck: which sources are one object)
- size relations: Expr, Sym, Relation, parse_expr, parse_relation
  (bind with GuardBuilder.bind_symbol, require with GuardBuilder.add_relation)
- trees: GuardBuilder, GuardTree, compile_guard, CompiledGuard, interpret, explain,
  GuardFailure
- cache: GuardCache, CacheEntry, MissReport, CacheLimitReached, cache_for,
  clear_all_caches
- backend identity: backend_scope, set_backend, reset_backend
- config: the `config` module (`config.options`, `config.patch`), GuardsConfig
"""

from guards import config as config
from guards.cache import (
    CacheEntry as CacheEntry,
)
from guards.cache import (
    CacheLimitReached as CacheLimitReached,
)
from guards.cache import (
    GuardCache as GuardCache,
)
from guards.cache import (
    MissReport as MissReport,
)
from guards.cache import (
    cache_for as cache_for,
)
from guards.cache import (
    clear_all_caches as clear_all_caches,
)
from guards.checks import (
    AliasCheck as AliasCheck,
)
from guards.checks import (
    BackendMatch as BackendMatch,
)
from guards.checks import (
    Check as Check,
)
from guards.checks import (
    DictKeysMatch as DictKeysMatch,
)
from guards.checks import (
    EqualsMatch as EqualsMatch,
)
from guards.checks import (
    GlobalStateMatch as GlobalStateMatch,
)
from guards.checks import (
    IdMatch as IdMatch,
)
from guards.checks import (
    KeyAbsent as KeyAbsent,
)
from guards.checks import (
    LengthMatch as LengthMatch,
)
from guards.checks import (
    NotNone as NotNone,
)
from guards.checks import (
    TensorMatch as TensorMatch,
)
from guards.checks import (
    TypeMatch as TypeMatch,
)
from guards.codegen import CompiledGuard as CompiledGuard
from guards.codegen import compile_guard as compile_guard
from guards.config import GuardsConfig as GuardsConfig
from guards.exprs import (
    Expr as Expr,
)
from guards.exprs import (
    Relation as Relation,
)
from guards.exprs import (
    Sym as Sym,
)
from guards.exprs import (
    parse_expr as parse_expr,
)
from guards.exprs import (
    parse_relation as parse_relation,
)
from guards.interpret import GuardFailure as GuardFailure
from guards.interpret import explain as explain
from guards.interpret import interpret as interpret
from guards.sources import (
    AttrSource as AttrSource,
)
from guards.sources import (
    BufferSource as BufferSource,
)
from guards.sources import (
    CallSource as CallSource,
)
from guards.sources import (
    ClosureSource as ClosureSource,
)
from guards.sources import (
    ConstSource as ConstSource,
)
from guards.sources import (
    DefaultSource as DefaultSource,
)
from guards.sources import (
    GlobalSource as GlobalSource,
)
from guards.sources import (
    ItemSource as ItemSource,
)
from guards.sources import (
    LocalSource as LocalSource,
)
from guards.sources import (
    ParamSource as ParamSource,
)
from guards.sources import (
    SizeSource as SizeSource,
)
from guards.sources import (
    Source as Source,
)
from guards.sources import (
    StrideSource as StrideSource,
)
from guards.sources import (
    SubmoduleSource as SubmoduleSource,
)
from guards.state import (
    backend_scope as backend_scope,
)
from guards.state import (
    reset_backend as reset_backend,
)
from guards.state import (
    set_backend as set_backend,
)
from guards.tree import GuardBuilder as GuardBuilder
from guards.tree import GuardTree as GuardTree

__version__ = "0.1.0"

__all__ = [
    "AliasCheck",
    "AttrSource",
    "BackendMatch",
    "BufferSource",
    "CacheEntry",
    "CacheLimitReached",
    "CallSource",
    "Check",
    "ClosureSource",
    "CompiledGuard",
    "ConstSource",
    "DefaultSource",
    "DictKeysMatch",
    "EqualsMatch",
    "Expr",
    "GlobalSource",
    "GlobalStateMatch",
    "GuardBuilder",
    "GuardCache",
    "GuardFailure",
    "GuardTree",
    "GuardsConfig",
    "IdMatch",
    "ItemSource",
    "KeyAbsent",
    "LengthMatch",
    "LocalSource",
    "MissReport",
    "NotNone",
    "ParamSource",
    "Relation",
    "SizeSource",
    "Source",
    "StrideSource",
    "SubmoduleSource",
    "Sym",
    "TensorMatch",
    "TypeMatch",
    "__version__",
    "backend_scope",
    "cache_for",
    "clear_all_caches",
    "compile_guard",
    "config",
    "explain",
    "interpret",
    "parse_expr",
    "parse_relation",
    "reset_backend",
    "set_backend",
]
