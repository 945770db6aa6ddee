"""binary/ reads files and cores: it never imports the log parsers, the rule engine, the
renderers or the analysis that wires them (the stages above it)."""

from __future__ import annotations

import ast
from pathlib import Path

import crashlens

BINARY = Path(crashlens.__file__).parent / "binary"
FORBIDDEN = ("parsers", "engine", "report", "analyze")


def _imports(path: Path) -> list[str]:
    package = ["crashlens", *path.relative_to(BINARY.parent).parent.parts]   # crashlens.binary[.sub]
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:                      # relative: resolved against the module's package
                base = package[:len(package) - node.level + 1]
                out.append(".".join([*base, mod] if mod else base))
            else:
                out.append(mod)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
    return out


def test_binary_imports_no_upper_stage():
    bad = [(p.name, m) for p in sorted(BINARY.rglob("*.py")) for m in _imports(p)
           if any(m == f"crashlens.{f}" or m.startswith(f"crashlens.{f}.") for f in FORBIDDEN)]
    assert bad == []
