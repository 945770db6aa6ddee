"""The optional Hyperscan binding: compiling databases and finding the expressions it refuses.

hyperscan has wheels for x86-64 only; without it (``available()`` is false) every pattern is
searched with ``regex``.  ``hs`` is the binding or None: setting it to None turns Hyperscan off
for line selection and rule evaluation alike (the tests do).

A set of expressions is compiled into one database.  When Hyperscan refuses the set, the
culprits are found by compiling each expression on its own; their patterns go to the
``regex`` fallback of the caller.
"""

from __future__ import annotations

from typing import Any, Sequence

try:  # optional accelerator
    import hyperscan as hs
except Exception:  # pragma: no cover - depends on the platform
    hs = None

#: Prefilter flags of every translation (see patterns.translate): a match of the
#: expression is only a candidate.  HS_FLAG_SINGLEMATCH is deliberately not used: it reports
#: a pattern once per scan call, not once per line.
PREFILTER = 0 if hs is None else hs.HS_FLAG_PREFILTER | hs.HS_FLAG_MULTILINE


def available() -> bool:
    return hs is not None


def database(expressions: Sequence[bytes], flags: int, *, ids: Sequence[int] | None = None,
             mode: int | None = None) -> Any:
    """One database of ``expressions`` (ids: 0.. unless given); raises hyperscan.error."""
    assert hs is not None
    db = hs.Database() if mode is None else hs.Database(mode=mode)
    db.compile(
        expressions=list(expressions),
        ids=list(range(len(expressions))) if ids is None else list(ids),
        elements=len(expressions),
        flags=[flags] * len(expressions),
    )
    return db


def compiles(expression: bytes, flags: int) -> bool:
    """Does Hyperscan accept this expression on its own (block mode)?"""
    assert hs is not None
    try:
        database([expression], flags)
        return True
    except hs.error:
        return False


def database_without_culprits(expressions: Sequence[bytes], ids: Sequence[int], flags: int
                              ) -> tuple[Any, list[int]]:
    """(database of the expressions, ids of those Hyperscan refuses) — usually everything
    compiles together at the first go; else the culprits are found one by one and left out.
    The database is None when nothing compiles."""
    assert hs is not None
    try:
        return (database(expressions, flags, ids=ids) if expressions else None), []
    except hs.error:
        pass
    ok: list[int] = []
    refused: list[int] = []
    for e, i in zip(expressions, ids):
        (ok if compiles(e, flags) else refused).append(i)
    by_id = dict(zip(ids, expressions))
    db = database([by_id[i] for i in ok], flags, ids=ok) if ok else None
    return db, refused
