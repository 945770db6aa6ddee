"""PyTorch's NCCL Flight Recorder dumps, read without executing anything, and compared across ranks.

    load_dump(data) -> dict                      a dump's plain data (pickle or JSON), or DumpError
    read_dump(data, name) -> RankDump            typed: the rank, process groups, status, entries
    compare(dumps) -> list[Evidence]             per process group, the first collective the ranks disagree on

A dump (TORCH_NCCL_DEBUG_INFO_TEMP_FILE / TORCH_FR_DUMP_TEMP_FILE + the rank, e.g.
`nccl_trace_rank_3`) is a pickle of plain containers, or JSON. It is read by an unpickler that
admits no global at all (so no class, function or reducer can run; `persistent_load` refused)
after a size check; only the fields used are then read, each bounded (a pickle can share one
list many times, so nothing is walked whole). Fields (torch/csrc/distributed/c10d FlightRecorder,
version 2.x): version, pg_config {pg: {name, desc, ranks}}, pg_status {pg: {last_enqueued_collective,
last_started_collective, last_completed_collective}}, entries [{pg_id, process_group, collective_seq_id,
p2p_seq_id, op_id, profiling_name, state (scheduled|started|completed), input_sizes, input_dtypes,
output_sizes, output_dtypes, frames [{name, filename, line}], time_created_ns, timeout_ms, is_p2p}].

The comparison aligns the ranks' entries per process group and collective sequence id, in the
window every rank's ring buffer still holds (a truncated buffer is not a missing rank): the first
sequence id where a rank has no entry while its last enqueued id is below it is a rank that never
joined (its last completed collective and its stack say where it was); entries that differ in op,
sizes or dtypes are a mismatch. When the dumps agree, it says so.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from ..model import Evidence, EvidenceKind, Frame, Loc
from ..pathkinds import frame_kind

MAX_DUMP_BYTES = 64 << 20
MAX_NODES = 2_000_000          # entries read of one dump
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.\w+)?$")


class DumpError(ValueError):
    """A file that is not a Flight Recorder dump crashlens will read."""


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # noqa: D401
        raise pickle.UnpicklingError(f"refused: the pickle names {module}.{name}; a Flight Recorder dump holds only plain data")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused: persistent ids")


def is_pickle(head: bytes) -> bool:
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def load_dump(data: bytes) -> Any:
    if len(data) > MAX_DUMP_BYTES:
        raise DumpError(f"{len(data):,} bytes: larger than the {MAX_DUMP_BYTES >> 20} MiB a dump is read up to")
    try:
        if data.lstrip()[:1] == b"{":
            return json.loads(data)
        return _NoGlobals(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            RecursionError, MemoryError, UnicodeDecodeError, OverflowError) as exc:
        raise DumpError(str(exc) or type(exc).__name__) from None


MAX_FRAMES, MAX_TENSORS, MAX_DIMS = 64, 64, 16   # per entry: what is read of its stack and tensor lists


def _str(v: Any, limit: int = 4096) -> str:
    if isinstance(v, str):
        return v[:limit]
    if isinstance(v, (bytes, bytearray)):
        return bytes(v[:limit]).decode("utf-8", "replace")
    return "" if v is None else str(v)[:limit] if isinstance(v, (int, float, bool)) else ""


def _list(v: Any, limit: int) -> list:
    return list(v[:limit]) if isinstance(v, (list, tuple)) else []


@lru_cache(maxsize=4096)
def _kind(path: str) -> str:
    return frame_kind(path)


@dataclass(frozen=True)
class FrEntry:
    pg: str
    seq: int | None           # collective_seq_id (None for a p2p op)
    p2p_seq: int | None
    op: str                   # "nccl:all_reduce"
    state: str
    input_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    stack: tuple[tuple[str, str, int | None], ...]  # (function, file, line), outermost first
    time_created_ns: int | None
    timeout_ms: int | None
    is_p2p: bool

    @property
    def frames(self) -> tuple[Frame, ...]:
        """The stack as Frames (made when asked: a dump holds thousands of entries)."""
        return tuple(Frame(_kind(f), fn, f, line) for fn, f, line in self.stack)


@dataclass(frozen=True)
class RankDump:
    rank: int | None
    source: str
    version: str
    pg_ranks: dict[str, tuple[int, ...]]
    pg_names: dict[str, str]
    status: dict[str, dict[str, int]]     # pg -> last_enqueued/started/completed_collective
    entries: tuple[FrEntry, ...]
    notes: tuple[str, ...] = field(default=())


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _ranks(v: Any) -> tuple[int, ...]:
    if isinstance(v, str):
        return tuple(int(x) for x in re.findall(r"\d+", v[:1 << 20]))
    if isinstance(v, (list, tuple)):
        return tuple(r for r in (_int(x) for x in v[:1 << 20]) if r is not None)
    return ()


def read_dump(data: bytes, source: str) -> RankDump:
    """Only the fields used are read, each bounded (a pickle can repeat one shared list many times:
    nothing is walked beyond MAX_NODES entries, MAX_FRAMES frames, MAX_TENSORS tensors)."""
    doc = load_dump(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), (list, tuple)):
        raise DumpError("no 'entries': not a Flight Recorder dump")
    if len(doc["entries"]) > MAX_NODES:
        raise DumpError(f"{len(doc['entries']):,} entries: more than the {MAX_NODES:,} values read of a dump")
    m = _RANK_IN_NAME.search(source.rsplit("/", 1)[-1])
    rank = _int(doc.get("rank")) if doc.get("rank") is not None else (int(m.group(1)) if m else None)
    pg_ranks, pg_names = {}, {}
    cfgs = doc.get("pg_config")
    for pg, cfg in (list(cfgs.items())[:4096] if isinstance(cfgs, dict) else []):
        if isinstance(cfg, dict):
            pg_ranks[_str(pg)] = _ranks(cfg.get("ranks"))
            pg_names[_str(pg)] = _str(cfg.get("desc") or cfg.get("name") or pg)
    sts = doc.get("pg_status")
    status = {_str(pg): {_str(k): int(v) for k, v in list(st.items())[:16] if _int(v) is not None}
              for pg, st in (list(sts.items())[:4096] if isinstance(sts, dict) else []) if isinstance(st, dict)}
    entries = []
    for e in doc["entries"]:
        if not isinstance(e, dict):
            continue
        pg = e.get("process_group")
        pg_key = _str(pg[0]) if isinstance(pg, (list, tuple)) and pg else _str(e.get("pg_id", "0"))
        stack = tuple((_str(f.get("name")), _str(f.get("filename")), _int(f.get("line")))
                      for f in reversed(_list(e.get("frames"), MAX_FRAMES)) if isinstance(f, dict))
        entries.append(FrEntry(
            pg=pg_key, seq=_int(e.get("collective_seq_id")) if not e.get("is_p2p") else None, p2p_seq=_int(e.get("p2p_seq_id")),
            op=_str(e.get("profiling_name")), state=_str(e.get("state")),
            input_sizes=tuple(tuple(_int(x) or 0 for x in _list(t, MAX_DIMS)) for t in _list(e.get("input_sizes"), MAX_TENSORS)),
            input_dtypes=tuple(_str(x, 64) for x in _list(e.get("input_dtypes"), MAX_TENSORS)), stack=stack,
            time_created_ns=_int(e.get("time_created_ns")), timeout_ms=_int(e.get("timeout_ms")), is_p2p=bool(e.get("is_p2p"))))
    return RankDump(rank, source, str(doc.get("version") or ""), pg_ranks, pg_names, status, tuple(entries))


def _odd_ones(groups: dict[tuple, list[int]], per: dict[int, dict[int, FrEntry]], seq: int) -> list[int]:
    """The ranks that did something else: the smaller group; in a tie, the ranks whose collective
    differs from their own previous one (the others kept doing what every rank did before); [] when
    the dumps cannot tell."""
    sizes = sorted(len(v) for v in groups.values())
    if sizes.count(sizes[0]) == 1:
        return min(groups.values(), key=len)
    changed = []
    for key, rs in groups.items():
        prev = [per[r].get(seq - 1) for r in rs]
        if all(p is not None and (p.op, p.input_sizes, p.input_dtypes) != key for p in prev):
            changed += rs
    return changed if changed and len(changed) < sum(sizes) else []


def span(ranks: Iterable[int]) -> str:
    """0, 1, 2, 3, 7 -> "0-3, 7": many ranks read as ranges."""
    out: list[str] = []
    for r in sorted(set(ranks)):
        if out and "-" in out[-1] and int(out[-1].split("-")[1]) == r - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        elif out and "-" not in out[-1] and int(out[-1]) == r - 1:
            out[-1] = f"{out[-1]}-{r}"
        else:
            out.append(str(r))
    return ", ".join(out)


def _where(e: FrEntry | None) -> str:
    if e is None:
        return "no collective recorded"
    frames = e.frames
    user = next((f for f in reversed(frames) if f.kind == "user"), frames[-1] if frames else None)
    at = f" at {user.function} ({user.file.rsplit('/', 1)[-1]}:{user.line})" if user else ""
    return f"{e.op.split(':')[-1]} #{e.seq}{at}"


def compare(dumps: Iterable[RankDump]) -> list[Evidence]:
    dumps = [d for d in dumps if d.rank is not None]
    if not dumps:
        return []
    out: list[Evidence] = []
    source = dumps[0].source
    for pg in sorted({e.pg for d in dumps for e in d.entries} | {pg for d in dumps for pg in d.status}):
        per = {d.rank: {e.seq: e for e in d.entries if e.pg == pg and e.seq is not None} for d in dumps}
        ranks = sorted(per)
        expected = next((d.pg_ranks.get(pg) for d in dumps if d.pg_ranks.get(pg)), ())
        missing_dumps = sorted(set(expected) - set(ranks)) if expected else []
        enq = {d.rank: d.status.get(pg, {}).get("last_enqueued_collective") for d in dumps}
        done = {d.rank: d.status.get(pg, {}).get("last_completed_collective") for d in dumps}
        # the window every ring buffer still holds
        lows = [min(s) for s in per.values() if s]
        highs = [max(s) for s in per.values() if s]
        if not lows:
            continue
        lo, hi = max(lows), max(highs)
        facts: dict[str, Any] = {"source": "flight-recorder", "process_group": pg,
                                 "ranks_dumped": ", ".join(map(str, ranks))}
        if missing_dumps:
            facts["ranks_without_dump"] = ", ".join(map(str, missing_dumps))
        found = None
        for seq in range(lo, hi + 1):
            have = {r: per[r].get(seq) for r in ranks}
            absent = [r for r, e in have.items() if e is None and (enq.get(r) is None or enq[r] < seq)]
            present = {r: e for r, e in have.items() if e is not None}
            if absent and present:
                found = ("never-joined", seq, absent, present)
                break
            sigs = {(e.op, e.input_sizes, e.input_dtypes) for e in present.values()}
            if len(sigs) > 1:
                found = ("mismatch", seq, [], present)
                break
        name = next((d.pg_names.get(pg) for d in dumps if d.pg_names.get(pg)), pg)
        if found is None:
            text = (f"Flight Recorder, process group {name}: the {len(ranks)} dumped rank(s) agree on every collective "
                    f"#{lo}-#{hi}; the dumps cannot tell which rank was late")
            if missing_dumps:
                text += f" (no dump of rank(s) {facts['ranks_without_dump']}: look there)"
                facts["suspect_ranks"] = facts["ranks_without_dump"]
            out.append(Evidence(EvidenceKind.COLLECTIVE_SUMMARY, text, Loc(source, 0), facts={**facts, "reason": "agree"}))
            continue
        kind, seq, absent, present = found
        op = next(iter(present.values())).op.split(":")[-1]
        facts.update(seq=seq, op=op)
        waiting = sorted(r for r, e in present.items() if e.state != "completed")
        if waiting:
            facts["waiting_ranks"] = ", ".join(map(str, waiting))
        if kind == "never-joined":
            facts.update(reason="never-joined", suspect_ranks=", ".join(map(str, absent)), silent_ranks=", ".join(map(str, absent)))
            last = {r: per[r].get(done.get(r)) if done.get(r) is not None else None for r in absent}
            culprit = absent[0]
            e = last.get(culprit) or (per[culprit][max(per[culprit])] if per[culprit] else None)
            facts["culprit_last"] = _where(e)
            if done.get(culprit) is not None:
                facts["last_completed"] = done[culprit]
            text = (f"Flight Recorder, process group {name}: rank(s) {facts['suspect_ranks']} never joined {op} #{seq} "
                    f"that rank(s) {span(present)} entered; rank {culprit}'s last collective: "
                    f"{facts['culprit_last']} — it was elsewhere (data loading, a long step, a hang or a crash)")
            frames = e.frames if e is not None else ()
        else:
            groups: dict[tuple, list[int]] = {}
            for r, e in present.items():
                groups.setdefault((e.op, e.input_sizes, e.input_dtypes), []).append(r)
            parts = [f"rank(s) {span(rs)}: {k[0].split(':')[-1]} sizes {list(map(list, k[1]))} {', '.join(k[2])}"
                     for k, rs in sorted(groups.items(), key=lambda kv: kv[1])]
            ops = {k[0] for k in groups}
            what = "op" if len(ops) > 1 else ("dtypes" if len({k[2] for k in groups}) > 1 and len({k[1] for k in groups}) == 1
                                              else "sizes")
            minority = _odd_ones(groups, per, seq)
            facts.update(reason=f"{what}-mismatch", mismatch="; ".join(parts))
            if minority:
                facts["suspect_ranks"] = ", ".join(map(str, sorted(minority)))
            else:
                minority = sorted(present)
            text = (f"Flight Recorder, process group {name}: collective #{seq} differs between ranks ({what}): "
                    + "; ".join(parts))
            frames = present[minority[0]].frames
        out.append(Evidence(EvidenceKind.COLLECTIVE_SUMMARY, text, Loc(source, 0), facts=facts, frames=tuple(frames)))
    return out
