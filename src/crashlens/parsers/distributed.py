"""Per-rank progress of collectives, from ProcessGroupNCCL watchdog lines.

Each timeout line becomes a `collective` Evidence (rank, sequence number, op, last
enqueued/completed work). A `collective-summary` Evidence then compares the ranks: the ranks
that timed out waited in a collective that some other rank never reached — the ranks seen in
the log without a timeout, or the rank whose last enqueued work id is lowest. That rank is
where to look for the real failure (a crash, a hang, a long step only it runs).
"""

from __future__ import annotations

from typing import Iterable

import regex as re

from ..model import Evidence, Line, Loc

_WATCHDOG = re.compile(
    r"\[(?:PG [^\]]*? )?Rank (?P<rank>\d+)\][^\n]*?(?:Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
    r"OpType=(?P<op>\w+)[^)]*?(?:Timeout\(ms\)=(?P<timeout>\d+))?|Timeout at NCCL work: (?P<seq2>\d+))"
)
_ABORTED = re.compile(r"NCCL communicator was aborted on rank (?P<rank>\d+)\.[^\n]*?WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)")
_PROGRESS = re.compile(r"last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+)")
_RANK_TAG = re.compile(r"\[(?:Rank|rank) ?(?P<rank>\d+)\]|^\[rank(?P<rank2>\d+)\]")


def parse_collectives(lines: Iterable[Line]) -> list[Evidence]:
    out: list[Evidence] = []
    seen_ranks: set[int] = set()
    source = ""
    for ln in lines:
        source = source or ln.loc.source
        if ln.stream.startswith("rank"):
            seen_ranks.add(int(ln.stream[4:]))
        m = _WATCHDOG.search(ln.text) or _ABORTED.search(ln.text)
        if m is None:
            t = _RANK_TAG.search(ln.text)
            if t:
                seen_ranks.add(int(t.group("rank") or t.group("rank2")))
            continue
        gd = m.groupdict()
        rank = int(gd["rank"])
        seen_ranks.add(rank)
        facts: dict[str, object] = {"rank": rank}
        seq = gd.get("seq") or gd.get("seq2")
        if seq:
            facts["seq"] = int(seq)
        if gd.get("op"):
            facts["op"] = gd["op"]
        if gd.get("timeout"):
            facts["timeout_ms"] = int(gd["timeout"])
        p = _PROGRESS.search(ln.text)
        if p:
            facts["last_enqueued"] = int(p.group("enq"))
            facts["last_completed"] = int(p.group("done"))
        out.append(Evidence("collective", ln.text, ln.loc, facts=facts))
    if out:
        out.append(_summary(out, seen_ranks))
    return out


def _summary(events: list[Evidence], seen: set[int]) -> Evidence:
    timed_out = sorted({int(e.facts["rank"]) for e in events})  # type: ignore[arg-type]
    # ranks are numbered from 0: a rank below the highest one that reported nothing did not
    # time out, i.e. it never entered the collective the others waited in
    silent = sorted((seen | set(range(max(timed_out) + 1))) - set(timed_out))
    facts: dict[str, object] = {"waiting_ranks": ", ".join(map(str, timed_out))}
    ops = {(e.facts.get("op"), e.facts.get("seq")) for e in events if e.facts.get("seq") is not None}
    if len(ops) == 1:
        op, seq = next(iter(ops))
        facts["op"], facts["seq"] = op, seq
    enq = {int(e.facts["rank"]): int(e.facts["last_enqueued"]) for e in events if "last_enqueued" in e.facts}  # type: ignore[arg-type]
    behind: list[int] = []
    if len(set(enq.values())) > 1:
        low = min(enq.values())
        behind = sorted(r for r, v in enq.items() if v == low)
        facts["behind_ranks"] = ", ".join(map(str, behind))
    if silent:
        facts["silent_ranks"] = ", ".join(map(str, silent))
    suspect = silent or behind
    if suspect:
        facts["suspect_ranks"] = ", ".join(map(str, suspect))
        why = ("reported no timeout: they never entered the collective the others waited in"
               if silent else "are behind (lowest last enqueued work id)")
        text = f"ranks {facts['waiting_ranks']} timed out waiting; rank(s) {facts['suspect_ranks']} {why}"
    else:
        text = f"ranks {facts['waiting_ranks']} timed out waiting in the same collective"
    first = min(e.loc for e in events)
    last = max(e.loc for e in events)
    return Evidence("collective-summary", text, Loc(first.source, first.line, last.line if last.source == first.source else 0),
                    facts=facts)
