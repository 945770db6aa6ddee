"""LibraryReport -> the inspect JSON contract (crashlens.inspect/1) and a terminal view."""

from __future__ import annotations

import json
from typing import Any, Sequence

from .. import __version__
from ..inspect import LibraryReport, library_facts

SCHEMA = "crashlens.inspect/1"


def _image(i: Any) -> dict[str, Any]:
    return {"kind": i.kind, "arch": i.arch, "listed_arch": i.listed_arch, "section": i.section,
            "container": i.container, "compression": i.compression, "stored_size": i.stored_size,
            "uncompressed_size": i.uncompressed_size, "identifier": i.identifier or None,
            "ptx_version": i.ptx_version}


def _isa(census: Any, missing: dict[str, Any] | None) -> dict[str, Any] | None:
    if census is None:
        return None
    d = census.to_json()
    if missing is not None:
        d["missing_for_cpu"] = missing
    return d


def file_dict(r: LibraryReport) -> dict[str, Any]:
    out: dict[str, Any] = {"path": r.path, "build_id": r.facts.build_id if r.facts else None}
    out["elf"] = r.facts.to_dict() if r.facts is not None else None
    if r.cuda is not None:
        cuda: dict[str, Any] = {"images": [_image(i) for i in r.cuda.images],
                                "sass": sorted({i.listed_arch for i in r.cuda.images if i.kind == "sass"}),
                                "ptx": sorted({i.arch for i in r.cuda.images if i.kind == "ptx"}),
                                "compatible": r.verdict.compatible if r.verdict else None,
                                "reason": r.verdict.reason if r.verdict else None,
                                "device": (r.verdict.device if r.verdict else None) or r.gpu}
        out["cuda"] = cuda
    else:
        out["cuda"] = None
    out["isa"] = _isa(r.isa, r.isa_missing)
    out["errors"] = list(r.errors)
    return out


def render_json(reports: Sequence[LibraryReport]) -> str:
    doc = {"schema": SCHEMA, "tool": {"name": "crashlens", "version": __version__},
           "files": [file_dict(r) for r in reports]}
    return json.dumps(doc, indent=2, default=str)


def render_text(reports: Sequence[LibraryReport], console: Any) -> None:
    from rich.table import Table

    for r in reports:
        f = library_facts(r)
        t = Table(title=r.path, show_header=False, title_justify="left", expand=False)
        t.add_column(style="bold")
        t.add_column()
        if r.facts is not None:
            e = r.facts
            t.add_row("ELF", f"{e.elf_class} {e.machine} {e.type}" + (f", build-id {e.build_id}" if e.build_id else ""))
            if e.soname:
                t.add_row("SONAME", e.soname)
            if e.needed:
                t.add_row("NEEDED", ", ".join(e.needed))
            if e.runpath or e.rpath:
                t.add_row("RUNPATH" if e.runpath else "RPATH", e.runpath or e.rpath or "")
            if e.max_versions:
                t.add_row("needs", ", ".join(f"{k}_{v}" for k, v in sorted(e.max_versions.items())))
        if r.cuda is not None and r.cuda.images:
            t.add_row("CUDA", f"{len(r.cuda.sass)} SASS, {len(r.cuda.ptx)} PTX images")
            t.add_row("SASS", f.get("sass") or "none")
            t.add_row("PTX", f.get("ptx") or "none")
        elif r.cuda is not None:
            t.add_row("CUDA", "no fatbin")
        if r.verdict is not None:
            ok = {True: "[green]runs[/]", False: "[red]cannot run[/]", None: "[yellow]unknown[/]"}[r.verdict.compatible]
            t.add_row(f"on {r.verdict.device or r.gpu}", f"{ok}: {r.verdict.reason}")
        if r.isa is not None:
            t.add_row("x86 ISA", f"level {f.get('isa_level') or '?'}; baseline {f.get('isa_baseline') or '-'}; "
                                 f"dispatched {f.get('isa_dispatched') or '-'}")
        if r.isa_missing is not None:
            t.add_row("on this CPU", ("[red]missing baseline: " + f["isa_missing_baseline"] + "[/]")
                      if f.get("isa_missing_baseline") else "[green]baseline supported[/]")
        for err in r.errors:
            t.add_row("[yellow]error[/]", err)
        console.print(t)
