"""docs/architecture.md matches the tree: every module and every data file is named in it."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import ROOT

SRC = ROOT / "src" / "crashlens"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _named(rel: Path) -> bool:
    stem, parent = rel.stem, rel.parent.as_posix()
    forms = [rf"`{re.escape(stem)}[`.(/ ]", rf"{re.escape(rel.as_posix())}", rf"{re.escape(stem)}\.py\b"]
    if parent != ".":
        forms.append(rf"{re.escape(parent)}/{re.escape(stem)}\b")
    return any(re.search(f, DOC) for f in forms)


def test_every_module_is_in_the_architecture():
    missing = [str(p.relative_to(SRC)) for p in sorted(SRC.rglob("*.py"))
               if p.name not in ("__init__.py", "__main__.py") and not _named(p.relative_to(SRC))]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_every_data_file_is_in_the_architecture():
    missing = [p.name for p in sorted((SRC / "data").iterdir()) if p.is_file() and p.name not in DOC]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_no_file_cited_that_is_not_in_the_repository():
    cited = set(re.findall(r"`((?:src|bench|tests|fixtures|docs|rules)/[\w./-]+\.(?:py|md|yaml|json|sh))`", DOC))
    assert not [c for c in cited if not (ROOT / c).exists()]
