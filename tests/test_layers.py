"""Layer contracts of the report stage: renderers receive an analysis and its signature as data;
they never run an analysis, never compute a signature, never evaluate rules."""

from __future__ import annotations

import ast
from pathlib import Path

REPORT = Path(__file__).resolve().parents[1] / "src" / "crashlens" / "report"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, imported names) of every import in a module of crashlens.report."""
    pkg = ["crashlens", *path.relative_to(REPORT.parent.parent).parent.parts[1:]]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            out.append((mod, [a.name for a in node.names]))
    return out


def test_report_never_analyses_nor_signs():
    files = sorted(REPORT.rglob("*.py"))
    assert any(f.parent.name == "bugreport" for f in files)
    for f in files:
        for mod, names in _imports(f):
            where = f"{f.relative_to(REPORT.parent)} imports {mod} {names}"
            assert not mod.startswith(("crashlens.analyze", "crashlens.engine", "crashlens.parsers",
                                       "crashlens.triage", "crashlens.cli")), where
            if mod == "crashlens.signature":
                assert set(names) <= {"Signature"}, where
            if mod == "crashlens":
                assert not set(names) & {"analyze", "signature", "engine", "triage"}, where
