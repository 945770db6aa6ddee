"""The Python API: analyse from a program, get the same result and JSON contract as the CLI.

    import crashlens

    a = crashlens.analyze(["run.log", "dmesg.txt"], gpu="H100")   # paths (files, folders, archives)
    a = crashlens.analyze(log_text)                               # or the text of one log
    a.causes[0].category, a.causes[0].confidence, a.primary_error
    a.signature.id                                                # the crash signature
    a.to_dict()                                                   # crashlens.analysis/1 (docs/json-schema.md)

`crashlens.analyze` is this module's `analyze` (`from crashlens.api import analyze` names it
directly). The result is a `crashlens.api.Analysis`: the pipeline's frozen `model.Analysis`
with `to_dict()` and `signature` added. Nothing is printed; problems with inputs are in `notes`
as in the CLI, and an input that cannot be read at all raises `crashlens.errors.InputError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Sequence, Union

from . import model
from .errors import InputError

__all__ = ["Analysis", "analyze", "schema"]

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Analysis(model.Analysis):
    """model.Analysis with its JSON contract and signature at hand."""

    @cached_property
    def signature(self):  # crashlens.signature.Signature: id (16 hex digits) and text
        from .signature import signature

        return signature(self)

    def to_dict(self) -> dict[str, Any]:
        """The `crashlens analyze --json` object (schema crashlens.analysis/1)."""
        from .report.json import to_dict

        return to_dict(self, self.signature)


def _is_text(value: Any) -> bool:
    return isinstance(value, bytes) or (isinstance(value, str) and ("\n" in value or not value.strip()))


def analyze(paths_or_text: PathLike | bytes | Iterable[PathLike], *, rules_dir: PathLike | None = None,
            lib_paths: Sequence[PathLike] = (), sysroot: PathLike | None = None, gpu: str | None = None,
            cpu_flags: Iterable[str] | None = None) -> Analysis:
    """Analyse paths (a path or a list of them: logs, dmesg, cores, libraries, folders, archives;
    `-` is stdin) or the text of one log (a string with a line break, or bytes).

    gpu: the device when the logs do not say (sm_90, 9.0, H100); cpu_flags: the CPU's flags;
    lib_paths, sysroot: where to find the libraries and executables the evidence names."""
    from .pipeline import Options, analyze_paths, analyze_text

    opts = Options(rules_dir=Path(rules_dir) if rules_dir else None, lib_paths=tuple(Path(p) for p in lib_paths),
                   sysroot=Path(sysroot) if sysroot else None, gpu=gpu,
                   cpu_flags=frozenset(f.lower() for f in cpu_flags) if cpu_flags is not None else None)
    if _is_text(paths_or_text):
        text = paths_or_text.decode("utf-8", "replace") if isinstance(paths_or_text, bytes) else paths_or_text
        a = analyze_text(str(text), "<text>", opts)
    else:
        paths = [paths_or_text] if isinstance(paths_or_text, (str, os.PathLike)) else list(paths_or_text)
        a = analyze_paths([os.fspath(p) for p in paths], opts)
        if paths and all(i.kind == "unreadable" for i in a.inputs):
            raise InputError("; ".join(f"{i.name}: {i.note}" for i in a.inputs))
    return Analysis(**{f.name: getattr(a, f.name) for f in fields(model.Analysis)})


def schema(name: str = "analysis") -> dict[str, Any]:
    """The JSON Schema of a contract: "analysis" (crashlens.analysis/1), "inspect", "triage"."""
    import json
    from importlib import resources

    fname = f"{name}.schema.json"
    shipped = resources.files("crashlens") / "schemas" / fname  # in the wheel (pyproject force-include)
    if shipped.is_file():
        return json.loads(shipped.read_text(encoding="utf-8"))
    source = Path(__file__).resolve().parents[2] / "docs" / fname  # a source checkout
    return json.loads(source.read_text(encoding="utf-8"))
