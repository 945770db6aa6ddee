"""The evidence stage of `analyze`: inputs -> normalised lines -> parser evidence.

    collect_evidence(inputs, rules, full_below=...) -> Collected   lines, evidence, notes, stats
    read_text_input(inp, anchors, full_below, out)                 one text input's lines
    rule_anchors(rules) -> patterns                               what a huge log must keep
    cpu_flags_from_file(path) -> set | None                       the flags of a cpuinfo/lscpu file

Text inputs are streamed (text.select keeps the head, the tail and windows around anchors in
huge logs), recoded to UTF-8 when they are UTF-16/32 (inputs.recode), normalised line by line
(text.normalize), read into their structure (structure: records, blocks, streams) and parsed
(tracebacks from the blocks; kernel records and outcomes line by line). ELF files and cores become
`input` evidence (the binary stage reads cores); what is skipped becomes a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import regex as re

from ..inputs.notes import summarise_notes
from ..inputs.recode import utf8_stream
from ..inputs.roles import text_role
from ..model import Evidence, EvidenceKind, InputFile, Line, LogStructure, Loc
from ..parsers.kernel import parse_kernel
from ..parsers.outcomes import link_outcomes, parse_outcome
from ..parsers.sanitizer import parse_sanitizer
from ..parsers.tracebacks import parse_tracebacks
from ..structure import read_structure
from ..text.anchors import anchors
from ..text.normalize import normalize_records
from ..text.select import SelectStats, select_lines
from .rules import RuleBase

FULL_BELOW = 8 << 20  # bytes of a text input read in full; beyond, lines around hits
MAX_KEPT = 30_000  # lines kept of one input: the first ones and the tail (every line a hit)
FULL_LINES = MAX_KEPT  # ... and below FULL_BELOW only if it has no more lines (8 MiB of empty lines)


@dataclass
class Collected:
    lines: list[Line] = field(default_factory=list)
    structures: list[LogStructure] = field(default_factory=list)   # one per text input read
    items: list[Evidence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: dict[str, object] = field(default_factory=dict)


def rule_anchors(rules: RuleBase) -> list[re.Pattern[str]]:
    """Compiled patterns whose lines (and their surroundings) a huge log must keep: the
    structure anchors (text.anchors) and every line pattern of the rules."""
    return anchors(c.pattern for r in rules.rules for part in (r.match, r.support, r.requires, r.absent) for c in part
                   if c.pattern is not None and "line" in c.kinds)


def read_text_input(inp: InputFile, anchors: Sequence[re.Pattern[str]], full_below: int, out: Collected) -> None:
    stats = SelectStats()
    try:
        stream = inp.open()
    except OSError as exc:
        out.notes.append(f"{inp.name}: could not be read: {exc.strerror or exc}")
        return
    stream = utf8_stream(stream, str(inp.facts.get("encoding") or ""))
    try:
        for lineno, raw in select_lines(stream, anchors, full_below=full_below, full_lines=FULL_LINES,
                                        max_kept=MAX_KEPT, stats=stats):
            out.lines.extend(normalize_records(raw, inp.name, lineno))
    except OSError as exc:
        out.notes.append(f"{inp.name}: read stopped at line {stats.total_lines}: {exc}")
    finally:
        err = getattr(stream, "error", None) or getattr(getattr(stream, "raw", None), "error", None)
        stream.close()
    if err:
        out.notes.append(f"{inp.name}: {err}; the lines before it were analysed")
    if stats.mode == "selected":
        out.notes.append(
            f"{inp.name}: {stats.total_lines:,} lines ({stats.total_bytes / 2**20:,.0f} MiB); analysed "
            f"{stats.kept_lines:,} lines: the head, the tail and windows around {stats.engine} hits")
    if stats.dropped_lines:
        out.notes.append(f"{inp.name}: matches on too many lines: only the first {MAX_KEPT - 3000:,} selected lines "
                         f"and the last 3,000 were analysed (the later matches were not looked for)")
    if stats.truncated_lines:
        out.notes.append(f"{inp.name}: {stats.truncated_lines} over-long line(s) were cut")
    out.stats[inp.name] = {"lines": stats.total_lines, "bytes": stats.total_bytes, "kept": stats.kept_lines,
                           "mode": stats.mode}


def collect_evidence(inputs: Iterable[InputFile], rules: RuleBase, full_below: int = FULL_BELOW) -> Collected:
    out = Collected()
    keep = rule_anchors(rules)
    dumps: list = []
    for inp in _error_files_in_time_order(list(inputs), out):
        if inp.kind == "text":
            role, why = _role(inp)
            if role == "flight-recorder":
                _read_dump(inp, out, dumps)
                continue
            if role in ("run-manifest", "run-samples"):
                _read_run_record(inp, role, why, out)
                continue
            if role in ("notebook", "elastic-error"):
                inp = _converted_input(inp, role, out)
                if inp is None:
                    continue
            elif role != "log":
                out.notes.append(f"{inp.name}: read as {why}, not as a log: not evidence")
                continue
            start = len(out.lines)
            read_text_input(inp, keep, full_below, out)
            src_lines = out.lines[start:]
            structure = read_structure(src_lines)
            out.structures.append(structure)
            out.items.extend(parse_tracebacks(structure))
            out.items.extend(parse_sanitizer(src_lines))
            outcomes = []
            for ln in src_lines:
                e = parse_kernel(ln)
                if e is not None:
                    out.items.append(e)
                e = parse_outcome(ln)
                if e is not None:
                    outcomes.append(e)
            out.items.extend(link_outcomes(outcomes))
        elif inp.kind in ("elf", "elf-core"):
            what = "core dump" if inp.kind == "elf-core" else "ELF binary"
            out.items.append(Evidence(EvidenceKind.INPUT, f"{inp.name}: {what}", Loc(inp.name),
                                      facts={"kind": inp.kind, **inp.facts}))
            if inp.kind == "elf" and "!" in inp.name:
                out.notes.append(f"{inp.name}: ELF inside an archive; extract it to inspect it")
        elif inp.kind == "empty":
            out.notes.append(f"{inp.name}: empty file, skipped")
        elif inp.kind == "binary" and not inp.note and _is_pickle(inp):
            _read_dump(inp, out, dumps)
        elif inp.kind == "binary" and not inp.note:  # with a note: inputs already said why
            out.notes.append(f"{inp.name}: binary data that is neither text nor ELF, skipped")
        elif inp.kind == "unreadable":
            out.notes.append(f"{inp.name}: {inp.note or 'could not be read'}")
    if dumps:
        from ..parsers.flightrecorder import compare

        out.items.extend(compare(dumps))
    out.notes = summarise_notes(out.notes)
    return out


def _error_files_in_time_order(inputs: list[InputFile], out: Collected) -> list[InputFile]:
    """torchelastic error files of several ranks in the order their processes failed (their
    timestamps; ties keep the given order), in the places they had among the inputs: the first
    failure is read first, so it is the one the primary error names."""
    from ..inputs.errorfile import MAX_ERROR_FILE_BYTES, error_file_time
    from ..inputs.streams import read_prefix

    slots: list[int] = []
    timed: list[tuple[float, int, InputFile]] = []
    for i, inp in enumerate(inputs):
        if inp.kind != "text" or _role(inp)[0] != "elastic-error":
            continue
        try:
            with inp.open() as stream:
                when = error_file_time(read_prefix(stream, MAX_ERROR_FILE_BYTES + 1))
        except OSError:
            when = None
        slots.append(i)
        timed.append((when if when is not None else float("inf"), len(timed), inp))
    if len(timed) < 2:
        return inputs
    ordered = sorted(timed, key=lambda t: (t[0], t[1]))
    out.notes.append("torchelastic error files in the order their processes failed: " + ", ".join(
        f"{inp.name} ({'no timestamp' if t == float('inf') else f'at {t:.0f}'})" for t, _i, inp in ordered))
    result = list(inputs)
    for slot, (_t, _i, inp) in zip(slots, ordered):
        result[slot] = inp
    return result


def _is_pickle(inp: InputFile) -> bool:
    from ..parsers.flightrecorder import is_pickle

    try:
        with inp.open() as stream:
            return is_pickle(stream.read(2))
    except OSError:
        return False


def _read_bounded(inp: InputFile, limit: int, out: Collected) -> bytes | None:
    """At most `limit` bytes of an input read whole (a JSON or pickle record); None, with a note,
    when it cannot be read."""
    from ..inputs.streams import read_prefix

    try:
        with inp.open() as stream:
            return read_prefix(stream, limit)
    except OSError as exc:
        out.notes.append(f"{inp.name}: could not be read: {exc.strerror or exc}")
        return None


def _read_dump(inp: InputFile, out: Collected, dumps: list) -> None:
    """A Flight Recorder dump (a pickle of plain data, or its JSON form), read without running
    anything; the dumps of all ranks are compared once every input is read."""
    from ..parsers.flightrecorder import MAX_DUMP_BYTES, DumpError, read_dump

    data = _read_bounded(inp, MAX_DUMP_BYTES + 1, out)
    if data is None:
        return
    try:
        dump = read_dump(data, inp.name)
    except DumpError as exc:
        out.notes.append(f"{inp.name}: a pickle or JSON file that was not read as a Flight Recorder dump: {exc}")
        return
    dumps.append(dump)
    out.notes.append(f"{inp.name}: read as the NCCL Flight Recorder dump of rank {dump.rank} "
                     f"({len(dump.entries)} collectives, format {dump.version or '?'})")


def _read_run_record(inp: InputFile, role: str, why: str, out: Collected) -> None:
    """A crashlens run bundle's manifest or samples: evidence of their own (parsers/run)."""
    from ..parsers.run import parse_run_manifest, parse_run_samples

    data = _read_bounded(inp, 16 << 20, out)
    if data is None:
        return
    got = (parse_run_manifest if role == "run-manifest" else parse_run_samples)(data, inp.name)
    out.items.extend(got)
    out.notes.append(f"{inp.name}: read as {why}")


def _converted_input(inp: InputFile, role: str, out: Collected) -> InputFile | None:
    """A notebook as the text of its cells' outputs, or a torchelastic error file as the
    traceback it holds, named `NAME#outputs` / `NAME#traceback` (its lines are the lines of that
    text, not of the JSON file); None, with a note, when it cannot be read as one."""
    import io
    from dataclasses import replace

    from ..inputs.errorfile import MAX_ERROR_FILE_BYTES, elastic_error_log
    from ..inputs.notebook import MAX_NOTEBOOK_BYTES, notebook_log

    limit = MAX_NOTEBOOK_BYTES if role == "notebook" else MAX_ERROR_FILE_BYTES
    data = _read_bounded(inp, limit + 1, out)
    if data is None:
        return None
    if role == "notebook":
        got = notebook_log(data)
        text, suffix = (got[0], "outputs") if got else (None, "")
        what = f"a Jupyter notebook: the outputs of {got[1]} cell(s)" if got else ""
    else:
        text, suffix, what = elastic_error_log(data, inp.name), "traceback", "a torchelastic error file"
    if text is None:
        out.notes.append(f"{inp.name}: looked like {'a notebook' if role == 'notebook' else 'a torchelastic error file'} "
                         f"but could not be read as one (JSON, at most {limit >> 20} MiB): not read")
        return None
    raw = text.encode("utf-8")
    name = f"{inp.name}#{suffix}"
    out.notes.append(f"{inp.name}: read as {what}, as {name} (line numbers are those of that text)")
    return replace(inp, name=name, size=len(raw), open=lambda: io.BytesIO(raw), facts={**inp.facts, "encoding": "utf-8"})


def _role(inp: InputFile) -> tuple[str, str]:
    """The role the inputs stage found from the detection prefix; for an input made elsewhere
    (the API's text), inputs.roles.text_role from its name and first bytes."""
    if inp.role:
        return inp.role, inp.role_reason
    try:
        with inp.open() as stream:
            head = stream.read(4096)
    except OSError:
        head = b""
    return text_role(inp.name, head)


def cpu_flags_from_file(path: str) -> set[str] | None:
    """CPU flags from a /proc/cpuinfo or lscpu text file (None when it lists none)."""
    from ..inputs import collect_inputs
    from ..parsers.environment import parse_environment

    inputs, _ = collect_inputs([path])
    col = Collected()
    for inp in inputs:
        if inp.kind == "text":
            read_text_input(inp, [], FULL_BELOW, col)
    env, _ = parse_environment(col.lines)
    flags = env.get("cpu_flags")
    return set(flags) if flags else None
