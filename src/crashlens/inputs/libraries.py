"""Which library files an analysis should inspect, and where they are on disk.

Libraries come from three places: ELF files given as inputs; paths and names the evidence
mentions (native frames `(… in /path/libx.so)`, Python frames in `.so` extensions, loader
errors naming a library or the object that needs it, `in libfoo.so[…]` of dmesg); and the
search options. A name is looked up, in order: at its own path re-rooted under --sysroot,
at its own path, then by basename under each --lib-path (recursively, bounded) and among
the ELF inputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import regex as re

from ..model import Evidence, InputFile

# a shared object named in a line: absolute or relative path, or a bare soname
_SO_NAME = re.compile(r"(?<![\w.+-])((?:/|\.{0,2}/)?[\w.+@-]+(?:/[\w.+@-]+)*\.so(?:\.[\w]+)*)(?![\w/])")
# lines whose library names matter: loader errors, native frames, dmesg faults
_CONTEXT = re.compile(
    r"cannot open shared object|required by|undefined symbol|version `|frame #\d|\bin /|"
    r"segfault at|trap invalid opcode|general protection|error while loading|from /|Could not load|ImportError|OSError")

MAX_WALK = 20000  # directory entries visited per --lib-path


@dataclass(frozen=True)
class LibraryRef:
    """A library the evidence points at."""

    name: str  # as written (a path or a soname)
    evidence: Evidence | None  # where it was named (None: given as an input)
    path: str | None  # where it was found on disk, if it was


def named_libraries(items: Iterable[Evidence]) -> list[tuple[str, Evidence]]:
    """(name, evidence) for every shared object the evidence names, first mention first."""
    seen: set[str] = set()
    out: list[tuple[str, Evidence]] = []

    def add(name: str, e: Evidence) -> None:
        name = name.strip()
        if name and name not in seen:
            seen.add(name)
            out.append((name, e))

    for e in items:
        if e.kind in ("line", "dmesg", "exception") and _CONTEXT.search(e.text):
            for m in _SO_NAME.finditer(e.text):
                add(m.group(1), e)
        for f in e.frames:
            for cand in (f.module, f.file):
                if cand and ".so" in cand:
                    add(cand, e)
        module = e.facts.get("module") if e.kind == "dmesg" else None
        if isinstance(module, str) and module:
            add(module, e)
    return out


def _index(lib_paths: Sequence[Path]) -> dict[str, str]:
    """basename -> first path found under the --lib-path folders (bounded walk)."""
    index: dict[str, str] = {}
    for root in lib_paths:
        visited = 0
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            for fn in sorted(filenames):
                visited += 1
                if ".so" in fn or fn.endswith((".dll", ".dylib")):
                    index.setdefault(fn, os.path.join(dirpath, fn))
            if visited > MAX_WALK:
                break
    return index


def build_id_index(lib_paths: Sequence[Path]) -> dict[str, str]:
    """build-id (hex) -> path of every ELF shared object under the --lib-path folders (bounded
    walk; reading a build-id costs one header read per file)."""
    from ..binary.elffacts import read_elf_facts
    from ..errors import CrashlensError

    out: dict[str, str] = {}
    for path in _index(lib_paths).values():
        try:
            bid = read_elf_facts(path).build_id
        except (CrashlensError, OSError):
            continue
        if bid:
            out.setdefault(bid, path)
    return out


def locate(names: Sequence[tuple[str, Evidence | None]], *, inputs: Sequence[InputFile] = (),
           lib_paths: Sequence[Path] = (), sysroot: Path | None = None) -> list[LibraryRef]:
    index = _index(lib_paths) if lib_paths else {}
    by_input = {Path(i.name).name: i.name for i in inputs if i.kind == "elf" and "!" not in i.name}
    out: list[LibraryRef] = []
    for name, ev in names:
        found = None
        candidates = []
        if sysroot is not None and name.startswith("/"):
            candidates.append(sysroot / name.lstrip("/"))
        if name.startswith("/") or name.startswith("."):
            candidates.append(Path(name))
        for c in candidates:
            if _is_file(c):
                found = str(c)
                break
        base = Path(name).name
        if found is None:
            found = index.get(base) or by_input.get(base)
        out.append(LibraryRef(name, ev, found))
    return out


def _is_file(path: Path) -> bool:
    """Path.is_file without the exceptions: a path a log names may lie under a folder this user
    cannot read (/root/.cache/... in a log read by another user)."""
    try:
        return path.is_file()
    except OSError:
        return False
