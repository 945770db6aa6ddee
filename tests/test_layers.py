"""Import contracts between the pipeline's layers (docs/architecture.md), checked with `ast`.

The lower layers (inputs, text, parsers, binary) never import the engine, the renderers or the
module that wires the pipeline; the engine does not import the module that wires it (no cycle);
the renderers never import the pipeline (they render an Analysis, they do not run one). Lazy
imports inside functions count too.

Layer contracts of the report stage: renderers receive an analysis and its signature as data;
they never run an analysis, never compute a signature, never evaluate rules.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "crashlens"

FORBIDDEN = {
    "crashlens.parsers": ("crashlens.engine", "crashlens.report", "crashlens.pipeline", "crashlens.api"),
    # the structure stage reads lines (text) and gives blocks to the parsers above it
    "crashlens.structure": ("crashlens.parsers", "crashlens.engine", "crashlens.report", "crashlens.pipeline",
                            "crashlens.api", "crashlens.binary", "crashlens.inputs"),
    "crashlens.text": ("crashlens.structure", "crashlens.engine", "crashlens.report", "crashlens.pipeline", "crashlens.api"),
    "crashlens.patterns": ("crashlens.text", "crashlens.engine", "crashlens.report", "crashlens.pipeline", "crashlens.api"),
    "crashlens.inputs": ("crashlens.engine", "crashlens.report", "crashlens.pipeline", "crashlens.api"),
    "crashlens.binary": ("crashlens.parsers", "crashlens.engine", "crashlens.report", "crashlens.pipeline", "crashlens.api"),
    "crashlens.engine": ("crashlens.report", "crashlens.pipeline", "crashlens.api"),  # the engine is wired, it does not wire
    "crashlens.report": ("crashlens.pipeline", "crashlens.api",),
}

# (importing module, imported module) pairs that break a contract today and are being fixed
# elsewhere; each must still occur (a stale entry fails the test), and none may be added.
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module a file imports, absolute (relative imports resolved against its package)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from . import analyze`
    return out


def _violations() -> set[tuple[str, str]]:
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        name = _module_name(path)
        for layer, banned in FORBIDDEN.items():
            if name != layer and not name.startswith(layer + "."):
                continue
            for mod in _imports(path):
                for b in banned:
                    if mod == b or mod.startswith(b + "."):
                        found.add((name, b))
    return found


def test_layers_import_only_downwards():
    found = _violations()
    new = sorted(found - KNOWN_VIOLATIONS)
    assert not new, "layer contract broken (docs/architecture.md): " + ", ".join(f"{a} imports {b}" for a, b in new)
    stale = sorted(KNOWN_VIOLATIONS - found)
    assert not stale, "fixed: remove from KNOWN_VIOLATIONS: " + ", ".join(f"{a} -> {b}" for a, b in stale)


def test_the_checker_sees_relative_and_lazy_imports():
    f = SRC / "binary" / "stage.py"
    mods = _imports(f)
    assert "crashlens.model" in mods and "crashlens.binary.crashsite" in mods  # lazy, relative


# -- the report stage ---------------------------------------------------------------------------

REPORT = Path(__file__).resolve().parents[1] / "src" / "crashlens" / "report"


def _report_imports(path: Path) -> list[tuple[str, list[str]]]:
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
        for mod, names in _report_imports(f):
            where = f"{f.relative_to(REPORT.parent)} imports {mod} {names}"
            assert not mod.startswith(("crashlens.pipeline", "crashlens.api", "crashlens.engine", "crashlens.parsers",
                                       "crashlens.triage", "crashlens.cli")), where
            if mod == "crashlens.signature":
                assert set(names) <= {"Signature"}, where
            if mod == "crashlens":
                assert not set(names) & {"analyze", "signature", "engine", "triage"}, where
