"""The tables behind the ISA census, built once per process from iced-x86 and data/isa.yaml.

Each iced `Code` (one integer per opcode form) maps to the extensions it needs beyond baseline
x86-64 (`code_exts`), whether it raises #UD without them (`faulting`), whether it touches SIMD
registers (`simd_codes`); extensions carry their x86-64 level, /proc/cpuinfo flags and rank; name
hints (`hint`) say which symbol and file names mark code built for one ISA.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import iced_x86
import yaml

__all__ = ["LEVEL_NAMES", "Extension", "Tables", "tables", "extension", "extensions"]

LEVEL_NAMES = {1: "x86-64", 2: "x86-64-v2", 3: "x86-64-v3", 4: "x86-64-v4"}


@dataclass(frozen=True)
class Extension:
    name: str
    level: int | None          # x86-64 micro-architecture level, None when in no level
    cpuinfo: tuple[str, ...]   # /proc/cpuinfo flags (any of); () = not shown by Linux
    rank: int
    kind: str                  # vector, scalar, system
    note: str = ""
    totals_only: bool = False


class Tables:
    """Everything derived from iced-x86 and data/isa.yaml, built once per process."""

    def __init__(self) -> None:
        text = (resources.files("crashlens") / "data" / "isa.yaml").read_text("utf-8")
        self.digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        feat_names = _enum_names(iced_x86.CpuidFeature)
        code_names = _enum_names(iced_x86.Code)
        self.mnemonics = {v: k.lower() for k, v in _enum_names(iced_x86.Mnemonic, by_name=True).items()}
        totals_only = set(doc.get("totals_only") or [])
        self.exts: list[Extension] = []
        by_iced: dict[str, int] = {}
        for row in doc["extensions"]:
            ext = Extension(str(row["name"]), row.get("level"), tuple(row.get("cpuinfo") or ()),
                            int(row.get("rank", 0)), str(row.get("kind", "vector")), str(row.get("note", "")),
                            row["name"] in totals_only)
            for n in row.get("iced") or ():
                by_iced[n] = len(self.exts)
            self.exts.append(ext)
        baseline = set(doc.get("baseline_features") or [])
        ncodes = max(code_names) + 1
        features: list[list[str]] = [[]] * ncodes
        for code in range(1, ncodes):
            names = [feat_names.get(f, str(f)) for f in iced_x86.Instruction.create(code).cpuid_features()]
            features[code] = [n for n in names if n not in baseline]
            for n in features[code]:
                if n not in by_iced:  # an iced feature isa.yaml does not list: report it as is
                    by_iced[n] = len(self.exts)
                    self.exts.append(Extension(n, None, (), 45, "system"))
        # internal pseudo-extensions, never reported as extensions
        self.INVALID = len(self.exts)
        self.exts.append(Extension("(undecodable)", None, (), 0, "internal"))
        self.CPUID = len(self.exts)
        self.exts.append(Extension("(cpuid)", None, (), 0, "internal"))
        self.index = {_norm(e.name): i for i, e in enumerate(self.exts)}
        for i, e in enumerate(self.exts):
            for flag in e.cpuinfo:
                self.index.setdefault(_norm(flag), i)
        for n, i in by_iced.items():
            self.index.setdefault(_norm(n), i)
        self.code_exts: list[tuple[int, ...]] = [()] * ncodes
        self.faulting: list[bool] = [True] * ncodes
        simd: set[int] = set()
        simd_kinds = ("XMM", "YMM", "ZMM", "MM_", "K_", "KP1", "TMM")
        code_by_name = {v: k for k, v in code_names.items()}
        for code in range(1, ncodes):
            ids = tuple(dict.fromkeys(by_iced[n] for n in features[code]))
            try:
                kinds = [_OPK_NAMES.get(k, "") for k in iced_x86.OpCodeInfo(code).op_kinds()]
            except Exception:  # noqa: BLE001 - iced refuses an OpCodeInfo for a few pseudo codes
                kinds = []
            if any(k.startswith(simd_kinds) for k in kinds) or any(self.exts[i].kind == "vector" for i in ids):
                simd.add(code)
            self.code_exts[code] = ids
        lahf = self.index[_norm("LAHF-SAHF")]
        for n in ("LAHF", "SAHF"):
            self.code_exts[code_by_name[n]] = (lahf,)
        self.code_exts[code_by_name["INVALID"]] = (self.INVALID,)
        self.code_exts[code_by_name["CPUID"]] = (self.CPUID,)
        self.cpuid_codes = {code_by_name["CPUID"], code_by_name["XGETBV"]}
        for row in doc.get("non_faulting") or ():
            for n in row["codes"]:
                if n in code_by_name:
                    self.faulting[code_by_name[n]] = False
        self.non_faulting_why = {code_by_name[n]: row["why"] for row in doc.get("non_faulting") or ()
                                 for n in row["codes"] if n in code_by_name}
        self.totals_ids = {i for i, e in enumerate(self.exts) if e.totals_only}
        self.totals_codes = tuple(c for c in range(ncodes) if self.code_exts[c]
                                  and set(self.code_exts[c]) <= self.totals_ids)
        self.hit_codes = frozenset(c for c in range(ncodes) if self.code_exts[c]
                                   and not set(self.code_exts[c]) <= self.totals_ids)
        self.simd_codes = frozenset(simd)
        # matched against lower-cased names without re.IGNORECASE: literal prefixes stay fast
        # substring tests on the lower-cased name, highest rank first (a regex alternation with
        # look-arounds cost ~50 us per long mangled name; `in` costs ~50 ns per token)
        rows = sorted(doc.get("name_hints") or (), key=lambda h: -int(h["rank"]))
        self.hints = [(int(h["rank"]), tuple(str(x).lower() for x in h.get("any") or ()),
                       tuple(str(x).lower() for x in h.get("words") or ())) for h in rows]
        self.regex_hints = [(str(h["needle"]).lower(), re.compile(h["pattern"]),
                             {str(k): int(v) for k, v in (h.get("ranks") or {}).items()})
                            for h in doc.get("regex_hints") or ()]
        self.feature_symbols = tuple(doc.get("cpu_feature_symbols") or ())

    def ext_id(self, name: str) -> int | None:
        return self.index.get(_norm(name))

    def hint(self, text: str | None) -> tuple[int, str] | None:
        """(rank, matched text) of the strongest ISA hint in a symbol or file name."""
        if not text:
            return None
        low = text.lower()
        best = None
        for needle, rx, ranks in self.regex_hints:
            if needle in low:
                m = rx.search(text)
                if m and m.group(1) in ranks and (best is None or ranks[m.group(1)] > best[0]):
                    best = (ranks[m.group(1)], m.group(0).strip("_"))
        for rank, tokens, words in self.hints:
            if best is not None and best[0] >= rank:
                return best
            for tok in tokens:
                if tok in low:
                    return rank, tok
            for w in words:
                pos = low.find(w)
                while pos >= 0:
                    end = pos + len(w)
                    if (pos == 0 or not low[pos - 1].isalpha()) and (end == len(low) or not low[end].isalpha()):
                        return rank, w
                    pos = low.find(w, pos + 1)
        return best


def _norm(name: str) -> str:
    return re.sub(r"[-_. ]", "", name).upper()


def _enum_names(mod: Any, by_name: bool = False) -> dict:
    pairs = {k: v for k, v in vars(mod).items() if not k.startswith("_") and isinstance(v, int)}
    return pairs if by_name else {v: k for k, v in pairs.items()}


_OPK_NAMES = _enum_names(iced_x86.OpCodeOperandKind)


@lru_cache(maxsize=1)
def tables() -> Tables:
    return Tables()


def extension(name: str) -> Extension | None:
    """The extension called `name` (crashlens, iced or cpuinfo spelling), or None."""
    t = tables()
    i = t.ext_id(name)
    return None if i is None or t.exts[i].kind == "internal" else t.exts[i]


def extensions() -> tuple[Extension, ...]:
    return tuple(e for e in tables().exts if e.kind != "internal")
