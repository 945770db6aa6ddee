"""Rank the rules that fired into causes, separating the primary error from its consequences.

Scoring, in the order it is applied (every step leaves a line in Cause.reasoning):
1. a firing starts at its rule's weight, plus the weights of its support evidence (≤ +0.2);
2. a firing whose every trigger lies in an exception raised while handling another one
   (the handler failed) is halved: it is a secondary error;
3. a firing whose rule is `consequence_of` a category that another firing also shows is
   multiplied by 0.45: e.g. an NCCL timeout on ranks that waited for a rank that hit a
   device-side assert, Xid 43 after an assert, `terminate called` after a specific error;
4. firings of one category combine by noisy-or, capped at the best firing + 0.1;
5. causes are sorted by score; ties go to the cause whose evidence comes first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Mapping, Sequence

import regex as re

from ..knowledge import data
from ..model import Cause, Evidence, Frame, Loc, SecondaryError
from .match import Firing
from .rules import RuleBase

SECONDARY_FACTOR = 0.5
LOW_SEVERITY_FACTOR = 0.6
# Informational and warning records (glog/absl "I0612 …", NCCL INFO/WARN, logging and the
# warnings module, c10 "[W …]"): the level the structure stage gave the line (structure/records)
LOW_SEVERITY = frozenset({"debug", "info", "warning"})
CONSEQUENCE_FACTOR = 0.45
FALLBACK_ALONE = 0.65   # confidence of a fallback cause that is the only one (see rank())
SUPPORT_CAP = 0.2
COMBINE_CAP = 0.1


def _only_wrappers(s: "_Scored") -> bool:
    """A firing whose every trigger is an exception that only reports another process's failure
    (torchrun's ChildFailedError, a pool's RemoteTraceback without its original): it explains
    nothing by itself, so nothing is its consequence."""
    return all(t.evidence.kind == "exception" and t.evidence.facts.get("wrapper") for t in s.firing.triggers)


def _low_severity(e: Evidence) -> bool:
    return e.kind == "line" and e.facts.get("level") in LOW_SEVERITY


def _notes() -> dict[str, Any]:
    return data("notes.yaml")


@dataclass
class _Scored:
    firing: Firing
    score: float
    reasoning: list[str]
    secondary: bool = False
    consequence: str = ""


def _within(e: Evidence, exc: Evidence) -> bool:
    if e.loc.source != exc.loc.source:
        return False
    end = exc.loc.end_line or exc.loc.line
    return exc.loc.line <= e.loc.line <= end


class _Spans:
    """Evidence line spans per source, sorted by first line, with the running maximum of their
    last lines: which spans hold a line, or overlap a range, in O(log n) (a log of 50k
    tracebacks would otherwise make ranking quadratic)."""

    def __init__(self, items: Sequence[Evidence]) -> None:
        by_source: dict[str, list[tuple[int, int, int, Evidence]]] = {}
        for i, e in enumerate(items):
            by_source.setdefault(e.loc.source, []).append((e.loc.line, i, e.loc.end_line or e.loc.line, e))
        self.spans: dict[str, tuple[list[int], list[int], list[tuple[int, int, int, Evidence]]]] = {}
        for source, rows in by_source.items():
            rows.sort(key=lambda r: (r[0], r[1]))
            top, tops = -1, []
            for r in rows:
                top = max(top, r[2])
                tops.append(top)
            self.spans[source] = ([r[0] for r in rows], tops, rows)

    def holder(self, source: str, line: int) -> Evidence | None:
        """The span holding `line` that starts last (the later one of equal starts)."""
        import bisect

        found = self.spans.get(source)
        if found is None:
            return None
        starts, tops, rows = found
        j = bisect.bisect_right(starts, line) - 1
        while j >= 0 and tops[j] >= line:
            if rows[j][2] >= line:
                return rows[j][3]
            j -= 1
        return None

    def overlaps(self, e: Evidence) -> bool:
        import bisect

        found = self.spans.get(e.loc.source)
        if found is None:
            return False
        starts, tops, _rows = found
        i = bisect.bisect_right(starts, e.loc.end_line or e.loc.line)
        return i > 0 and tops[i - 1] >= e.loc.line


_exception_spans: list = [None, None]  # (the exceptions list it was built for, its _Spans)


def _exception_of(e: Evidence, exceptions: Sequence[Evidence]) -> Evidence | None:
    if e.kind == "exception":
        return e
    if _exception_spans[0] is not exceptions:
        _exception_spans[:] = [exceptions, _Spans([x for x in exceptions if x.kind == "exception"])]
    return _exception_spans[1].holder(e.loc.source, e.loc.line)


def _overlaps(a: Evidence, b: Evidence) -> bool:
    if a.loc.source != b.loc.source:
        return False
    return a.loc.line <= (b.loc.end_line or b.loc.line) and b.loc.line <= (a.loc.end_line or a.loc.line)


def _drop_explained(firings: Sequence[Firing], exceptions: Sequence[Evidence]) -> list[Firing]:
    """A fallback rule (the uncaught exception, the bare failure status) only speaks for
    evidence that no other rule explains: its triggers inside another firing's evidence, or in
    an exception chain of which another exception is explained, are dropped."""
    from dataclasses import replace

    specific_list = [m.evidence for f in firings if not f.rule.fallback for m in f.triggers]
    if not specific_list:
        return list(firings)
    specific = _Spans(specific_list)
    chains = {}
    for exc in exceptions:
        if exc.kind == "exception" and specific.overlaps(exc):
            chains[exc.facts.get("chain")] = True
    out = []
    for f in firings:
        if not f.rule.fallback:
            out.append(f)
            continue
        keep = tuple(m for m in f.triggers
                     if not specific.overlaps(m.evidence)
                     and not (m.evidence.kind == "exception" and chains.get(m.evidence.facts.get("chain"))))
        if keep:
            out.append(replace(f, triggers=keep) if len(keep) != len(f.triggers) else f)
    return out


def rank(firings: Sequence[Firing], exceptions: Sequence[Evidence], rules: RuleBase,
         environment: Mapping[str, Any], items: Sequence[Evidence] = ()) -> tuple[list[Cause], list[SecondaryError], Evidence | None]:
    scored: list[_Scored] = []
    firings = _drop_explained(firings, exceptions)
    for f in firings:
        more = f" (and {f.more:,} more matches not kept)" if f.more else ""
        reasoning = [f"rule {f.rule.id} ({f.rule.file}) fired on {len(f.triggers)} line(s){more}; "
                     f"weight {f.rule.weight:.2f}"]
        score = f.rule.weight
        support_conds = {s.condition for s in f.supports}
        if support_conds:
            bonus = min(SUPPORT_CAP, sum(f.rule.support[i].weight for i in support_conds))
            score += bonus
            reasoning.append(f"+{bonus:.2f} from supporting evidence ({len(support_conds)} kind(s))")
        if not f.rule.from_warnings and all(_low_severity(t.evidence) for t in f.triggers):
            score *= LOW_SEVERITY_FACTOR
            reasoning.append(f"×{LOW_SEVERITY_FACTOR}: only seen in informational or warning messages, "
                             f"which rarely end a run")
        owners = [_exception_of(t.evidence, exceptions) for t in f.triggers]
        if owners and all(o is not None and o.facts.get("secondary") for o in owners):
            score *= SECONDARY_FACTOR
            o = owners[0]
            assert o is not None
            reasoning.append(f"×{SECONDARY_FACTOR} because it only appears in an exception {o.facts.get('secondary_reason')}")
            scored.append(_Scored(f, score, reasoning, secondary=True))
        else:
            scored.append(_Scored(f, score, reasoning))

    # consequences: demote a firing when a cause it usually follows is also present.
    # Rules naming categories are demoted only by a category with independent evidence (a
    # firing whose rule is no one's consequence); then "any" rules (std::terminate, SIGABRT)
    # are demoted by any cause left standing.
    demoted: set[int] = set()
    for explicit in (True, False):
        for i, s in enumerate(scored):
            cons = s.firing.rule.consequence_of
            if not cons or ("*" not in cons) != explicit:
                continue
            own = s.firing.rule.category
            others = sorted({o.firing.rule.category for j, o in enumerate(scored)
                             if j not in demoted and not o.secondary and o.firing.rule.category != own
                             and ("*" in cons or o.firing.rule.category in cons)
                             and (not explicit or not o.firing.rule.consequence_of)
                             and not _only_wrappers(o)},
                            key=lambda c: -max(o.score for o in scored if o.firing.rule.category == c))
            if others:
                demoted.add(i)
                s.score *= CONSEQUENCE_FACTOR
                s.consequence = others[0]
                s.reasoning.append(
                    f"×{CONSEQUENCE_FACTOR}: {s.firing.rule.title[0].lower() + s.firing.rule.title[1:]} is usually a "
                    f"consequence of {others[0]}, which the evidence also shows")

    # combine per category
    by_cat: dict[str, list[_Scored]] = {}
    for s in scored:
        by_cat.setdefault(s.firing.rule.category, []).append(s)
    causes: list[tuple[float, Loc, Cause, _Scored]] = []
    groups: dict[str, list[_Scored]] = {}
    for cat, group in by_cat.items():
        group.sort(key=lambda s: (-s.score, s.firing.triggers[0].evidence.loc))
        best = group[0]
        miss = 1.0
        for s in group:
            miss *= 1.0 - min(s.score, 0.99)
        score = min(1.0 - miss, best.score + COMBINE_CAP)
        reasoning = list(best.reasoning)
        if len(group) > 1:
            reasoning.append(
                f"combined with {len(group) - 1} other rule(s) of this category "
                f"({', '.join(s.firing.rule.id for s in group[1:])}): {best.score:.2f} → {score:.2f}")
        evidence = _evidence_of(group)
        first = min(e.loc for e in evidence)
        cause = Cause(
            category=cat,
            rule=best.firing.rule.id,
            title=best.firing.rule.title,
            confidence=round(max(0.01, min(score, 0.99)), 2),
            explanation=_explain(best.firing, group, environment, exceptions),
            remedies=_remedies(best.firing, _values(best.firing, group, environment), group),
            references=best.firing.rule.references,
            evidence=tuple(evidence),
            reasoning=tuple(reasoning),
            other_rules=tuple(s.firing.rule.id for s in group[1:]),
            secondary=best.secondary or bool(best.consequence),
            consequence_reason=best.consequence,
        )
        causes.append((score, first, cause, best))
        groups[cat] = group
    causes.sort(key=lambda c: (-c[0], c[1]))
    for i, (score, first, cause, _) in enumerate(causes):
        if i + 1 < len(causes):
            nxt = causes[i + 1]
            why = (f"ranked above {nxt[2].category} ({nxt[0]:.2f})" if score > nxt[0]
                   else f"tied with {nxt[2].category}; its evidence comes first ({first})")
            causes[i] = (score, first, _with_reason(cause, why), causes[i][3])

    ranked = [c[2] for c in causes]
    if len(causes) == 1 and causes[0][3].firing.rule.fallback and ranked[0].confidence < FALLBACK_ALONE:
        # an ordinary exception with nothing else in the inputs: on the blind real sets of
        # 2026-11-28 (fixtures/real-*/BLIND.txt) the fallback alone was right on 39 of 43 cases;
        # its rule weight (0.45) is what it scores beside other causes, not alone
        c = ranked[0]
        ranked[0] = replace(c, confidence=FALLBACK_ALONE, reasoning=(*c.reasoning, (
            f"confidence {c.confidence:.2f} -> {FALLBACK_ALONE}: the only cause found, an ordinary exception "
            f"with nothing in the inputs pointing elsewhere")))
    secondary = _secondary_errors(causes, exceptions)
    secondary += _imposed_signals(items)
    if ranked:
        ranked[0], extra = _check_torchrun(ranked[0], items)
        secondary += extra
    primary = _primary(causes, exceptions, groups, items)
    if primary is not None and primary.rank is None and causes:
        primary = _with_rank(primary, causes[0][3], groups.get(causes[0][2].category, ()))
    return ranked, secondary, primary


def _with_reason(cause: Cause, why: str) -> Cause:
    from dataclasses import replace

    return replace(cause, reasoning=cause.reasoning + (why,))


def _evidence_of(group: Sequence[_Scored]) -> list[Evidence]:
    seen: set[tuple[str, int, str]] = set()
    out: list[Evidence] = []
    for s in group:
        for m in (*s.firing.triggers, *s.firing.supports, *s.firing.requirements):
            # a line once, whatever parsed it; records of a whole file (line 0) by their text
            key = (m.evidence.loc.source, m.evidence.loc.line, m.evidence.text if not m.evidence.loc.line else "")
            if key in seen:
                continue
            seen.add(key)
            out.append(m.evidence)
            if len(out) >= 12:
                return out
    return out


_FIELD = re.compile(r"\{(\w+)\}")


def _flat_env(env: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    gpus = env.get("gpus") or []
    if gpus:
        g = gpus[0]
        if g.get("name"):
            out["gpu"] = g["name"]
        if g.get("sm"):
            out["env_sm"] = g["sm"]
        if g.get("compute_capability"):
            out["env_cc"] = g["compute_capability"]
    for k in ("cuda_runtime", "cuda_driver", "driver_version", "cudnn"):
        if env.get(k):
            out[k] = str(env[k])
    for k, v in (env.get("framework") or {}).items():
        out[k] = str(v)
    return out


def _fill(template: str, values: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        return values.get(m.group(1), "(not shown)")

    # drop a parenthesised or bracketed aside whose field is unknown: "[…{x}…]" optional parts
    # an empty value (an exception without a message) counts as unknown
    template = re.sub(r"\[\[(.*?)\]\]", lambda m: m.group(1) if all(
        values.get(f) for f in _FIELD.findall(m.group(1))) else "", template, flags=re.S)
    return _FIELD.sub(sub, template).strip()


def innermost_user_frame(exc: Evidence | None) -> Frame | None:
    if exc is None:
        return None
    for f in reversed(exc.frames):
        if f.kind == "user":
            return f
    return None


def _explain(f: Firing, group: Sequence[_Scored], env: Mapping[str, Any], exceptions: Sequence[Evidence]) -> str:
    values = _values(f, group, env)
    text = _fill(f.rule.explain, values)
    if f.rule.async_cuda:
        exc = None
        for t in f.triggers:
            exc = _exception_of(t.evidence, exceptions)
            if exc is not None:
                break
        if exc is None:
            cands = [e for e in exceptions if e.kind == "exception" and e.frames]
            exc = cands[-1] if cands else None
        frame = innermost_user_frame(exc)
        note = _notes()[_async_note(group)]
        values.update(_fault_values(group))
        if frame:
            values["python_line"] = f"{frame.code or frame.function} ({frame.file.rsplit('/', 1)[-1]}:{frame.line})"
        values["sync_point"] = values.get("python_line", "the reported Python line")
        text += " " + _fill(note["explain"], values)
    return " ".join(text.split())


def _gpu_fault_of(group: Sequence["_Scored"]) -> Evidence | None:
    """A GPU core's or compute-sanitizer's fault among a cause's evidence that names its kernel."""
    for s in group:
        for m in (*s.firing.triggers, *s.firing.supports):
            if m.evidence.kind == "gpu-fault" and m.evidence.facts.get("kernel"):
                return m.evidence
    return None


def _async_note(group: Sequence["_Scored"]) -> str:
    return "async_cuda_known" if _gpu_fault_of(group) is not None else "async_cuda"


def _fault_values(group: Sequence["_Scored"]) -> dict[str, str]:
    fault = _gpu_fault_of(group)
    if fault is None:
        return {}
    f = fault.facts
    src = {"gpu-core": "GPU core dump", "compute-sanitizer": "compute-sanitizer report"}.get(
        str(f.get("source")), "GPU fault report")
    out = {"fault_source": src, "kernel": str(f.get("kernel"))}
    for key in ("file", "line", "thread", "block"):
        if f.get(key) not in (None, ""):
            out[f"fault_{key}"] = str(f[key]).replace("\\", "/").rsplit("/", 1)[-1] if key == "file" else str(f[key])
    return out


def _remedies(f: Firing, values: Mapping[str, str], group: Sequence["_Scored"] = ()) -> tuple[str, ...]:
    out = [_fill(r, values) for r in f.rule.remedies]
    if f.rule.async_cuda:
        out += [r for r in _notes()[_async_note(group)]["remedies"] if r not in out]
    return tuple(r for r in out if r)


def _values(f: Firing, group: Sequence["_Scored"], env: Mapping[str, Any]) -> dict[str, str]:
    values = dict(_flat_env(env))
    for s in group[::-1]:
        values.update(s.firing.captures)
    values.update(f.captures)
    return values


def _secondary_errors(causes, exceptions: Sequence[Evidence]) -> list[SecondaryError]:
    out: list[SecondaryError] = []
    seen: set[Loc] = set()
    for exc in exceptions:
        if exc.kind == "exception" and exc.facts.get("secondary"):
            out.append(SecondaryError(exc, str(exc.facts.get("secondary_reason"))))
            seen.add(exc.loc)
    top = causes[0][2] if causes else None
    for score, first, cause, best in causes[1:]:
        if best.consequence or best.secondary:
            ev = best.firing.triggers[0].evidence
            if ev.loc in seen:
                continue
            seen.add(ev.loc)
            reason = (f"{cause.category} is usually a consequence of {best.consequence}" if best.consequence
                      else "raised while handling another error")
            if top is not None and best.consequence == top.category:
                reason += f" (ranked first: {top.rule})"
            out.append(SecondaryError(ev, reason))
    return out


_RANK_IN_TEXT = re.compile(r"\[Rank (\d+)\]|\brank (\d+)\b")


def _ranks_of(e: Evidence) -> set[int]:
    out: set[int] = set()
    stream = str(e.facts.get("stream") or "")
    if stream.startswith("rank") and stream[4:].isdigit():
        out.add(int(stream[4:]))
    for m in _RANK_IN_TEXT.finditer(e.text):
        out.add(int(m.group(1) or m.group(2)))
    return out


def _check_torchrun(top: Cause, items: Sequence[Evidence]) -> tuple[Cause, list[SecondaryError]]:
    """torchrun's "Root Cause (first observed failure)" names the first exit it saw, which
    can be a rank that was only collateral. Check it against the ranks the evidence shows."""
    summaries = [e for e in items if e.kind == "child-failure" and "rank" in e.facts]
    if not summaries:
        return top, []
    cf = summaries[0]
    named = int(cf.facts["rank"])
    shown: set[int] = set()
    for e in top.evidence:
        if e.kind != "child-failure":
            shown |= _ranks_of(e)
    if not shown:
        return top, []
    exit_desc = cf.facts.get("signal") or f"exit code {cf.facts.get('exit_code')}"
    if named in shown:
        return _with_reason(top, f"torchrun's root-cause summary (rank {named}, {exit_desc}) agrees: "
                                 f"the evidence for this cause comes from rank {named}"), []
    ranks = ", ".join(map(str, sorted(shown)))
    why = (f"torchrun names rank {named} ({exit_desc}) as the first observed failure, but the evidence for "
           f"this cause comes from rank(s) {ranks}; torchrun reports the first exit it noticed, not the "
           f"first error, so rank {named} is most likely collateral")
    return _with_reason(top, why), [SecondaryError(cf, why)]


def _imposed_signals(items: Sequence[Evidence]) -> list[SecondaryError]:
    out = []
    for e in items:
        if e.kind == "outcome" and e.facts.get("imposed"):
            who = e.facts.get("sent_by") or "the launcher"
            out.append(SecondaryError(e, f"{e.facts.get('signal') or 'a signal'} sent by {who} to stop the other "
                                         f"ranks after one failed; not a failure of its own"))
    return out


def _with_rank(primary: Evidence, best: _Scored, group: Sequence[_Scored]) -> Evidence:
    """A kernel's assertion or a C++ message goes to stderr without the launcher's rank tag:
    whose it is, the first rank-tagged trigger of the same firing says (its exception, say; not
    another rule's, which may be the peer that only noticed the failure), else the category's
    other firings that are not consequences, when they name one rank."""
    def tagged_in(firings: Sequence[_Scored]) -> list[Evidence]:
        return sorted((m.evidence for sc in firings for m in sc.firing.triggers
                       if m.evidence.rank is not None and m.evidence.loc.source == primary.loc.source),
                      key=lambda e: e.loc.line or 0)
    tagged = tagged_in([best])
    if not tagged:
        others = tagged_in([sc for sc in group if not sc.consequence])
        tagged = others if len({e.rank for e in others}) == 1 else []
    if not tagged:
        return primary
    return replace(primary, facts={**primary.facts, "rank": tagged[0].rank,
                                   "rank_from": f"the cause's first rank-tagged evidence ({tagged[0].loc})"})


_RECORD_HEAD = re.compile(r"^(?:\[[^\]]{0,120}\]:?\s*)+")


@cache
def _messengers() -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in data("primary.yaml")["messengers"]))


def _job_statement(first: Evidence, eligible: Sequence[_Scored], exceptions: Sequence[Evidence],
                   items: Sequence[Evidence], kernel: set[str]) -> Evidence:
    """What the job itself said of its failure, where `first` is someone else's report of it:
    - an outside agent's line (data/primary.yaml: timeout(1), slurmstepd, the kernel) followed by
      the job's own exception: that exception (the first root one after it; a kernel log's: the
      first in the job's output);
    - a launcher's log line (torchrun's `failed (exitcode: -9) local_rank: 0 (pid: …)`) where its
      failure table states the same outcome: the table's line (`traceback : Signal 9 (SIGKILL)
      received by PID …`), the launcher's summary of the failure."""
    agent = first.loc.source in kernel or (first.kind in ("line", "dmesg", "outcome") and _messengers().search(first.text))
    if agent:
        after = [e for e in exceptions if e.kind == "exception" and e.facts.get("root") and not e.facts.get("secondary")
                 and not e.facts.get("cut") and e.loc.source not in kernel
                 and (first.loc.source in kernel or (e.loc.source == first.loc.source and e.loc.line > first.loc.line))]
        if after:
            order = {src: i for i, src in enumerate(dict.fromkeys(e.loc.source for e in items))}
            return min(after, key=lambda e: (order.get(e.loc.source, 0), e.loc.line))
    if first.kind == "line" and first.facts.get("level") in ("error", "fatal"):
        # a logged error record that the job's exception then states again ("[E … ProcessGroupGloo.cpp:67]
        # [Rank 0]: Rank 1 failed to pass monitoredBarrier" and "RuntimeError: [Rank 0]: Rank 1 failed …")
        core = _RECORD_HEAD.sub("", first.text).strip()[:60]
        if len(core) >= 20:
            again = [e for e in exceptions if e.kind == "exception" and e.loc.source == first.loc.source
                     and e.loc.line > first.loc.line and e.facts.get("language") != "c++"
                     and core in str(e.facts.get("message") or "")]
            if again:
                return min(again, key=lambda e: e.loc.line)
    if first.kind == "outcome":
        tables = [e for e in items if e.kind == "child-failure" and e.loc.source == first.loc.source]
        stated = [m.evidence for s in eligible for m in (*s.firing.triggers, *s.firing.supports)
                  if m.evidence.kind == "outcome" and any(_within(m.evidence, t) for t in tables)
                  and m.evidence.facts.get("pid") == first.facts.get("pid")]
        if stated and not any(_within(first, t) for t in tables):
            return max(stated, key=lambda e: e.loc.line)
    return first


def _kernel_logs(items: Sequence[Evidence]) -> set[str]:
    """Inputs that are kernel logs (dmesg, journalctl -k): kernel records and no exception or
    process outcome of the job's own."""
    kernel = {e.loc.source for e in items if e.kind == "dmesg"}
    job = {e.loc.source for e in items if e.kind in ("exception", "outcome", "child-failure")}
    return kernel - job


def _primary(causes, exceptions: Sequence[Evidence], groups: Mapping[str, list[_Scored]] | None = None,
             items: Sequence[Evidence] = ()) -> Evidence | None:
    """The primary error: the first failure the top cause rests on, among the triggers of the
    category's firings that score at least half the best one: in the job's output before kernel
    records, in the inputs' order, and there the strongest firing's first trigger; read as the block
    it belongs to: a line of an exception's message is that exception (its headline is the error;
    the message's other lines, NCCL's "Last error:" say, belong to it)."""
    if not causes:
        return None
    best: _Scored = causes[0][3]
    group = (groups or {}).get(best.firing.rule.category) or [best]
    eligible = [s for s in group if s.score >= best.score / 2]
    order = {src: i for i, src in enumerate(dict.fromkeys(
        [e.loc.source for e in items] + [m.evidence.loc.source for s in eligible for m in s.firing.triggers]))}
    # the job's own output before kernel records (they explain the failure, the log shows it),
    # then the first input that shows it; in that input, the strongest firing's first trigger
    kernel = _kernel_logs(items)
    source = min(((m.evidence.loc.source in kernel, order[m.evidence.loc.source], m.evidence.loc.source)
                  for s in eligible for m in s.firing.triggers))[2]
    strongest = max((s for s in eligible if any(m.evidence.loc.source == source for m in s.firing.triggers)),
                    key=lambda s: s.score)
    there = [m.evidence for m in strongest.firing.triggers if m.evidence.loc.source == source]
    # an error record before an informational or warning one that says the same (an allocator's
    # "W … ran out of memory" before JAX's RESOURCE_EXHAUSTED)
    errors = [e for e in there if strongest.firing.rule.from_warnings
              or not _low_severity(e)]
    first = min(errors or there, key=lambda e: e.loc.line or 0)
    if first.kind == "line":
        # a line inside a traceback: a line of the exception's message, or the source line of one
        # of its frames (`raise GatedRepoError(message, response) from e`): the exception is the error
        inside = [exc for exc in exceptions if exc.kind == "exception" and _within(first, exc)
                  and (first.facts.get("stream") or "") == (exc.facts.get("stream") or "")]
        if inside:
            first = min(inside, key=lambda exc: (exc.loc.end_line or exc.loc.line) - exc.loc.line)
    first = _job_statement(first, eligible, exceptions, items, kernel)
    if first.kind == "exception" and first.facts.get("wrapper"):
        # "Caught KeyError in DataLoader worker process 0": the worker's original traceback that
        # follows it (the parser's reraised_by) is the error, raised first, with the user's frame
        original = next((e for e in exceptions if e.kind == "exception" and e.loc.source == first.loc.source
                         and e.facts.get("reraised_by") == first.facts.get("headline")
                         and e.loc.line >= first.loc.line), None)
        if original is not None:
            return original
    if first.kind == "exception" and not first.facts.get("root") and first.facts.get("link"):
        # `raise X(...) from Y`, or X raised while handling Y: the chain's first exception is the
        # failure, X the wrapper that says it again or the handler that failed after it
        chain = [e for e in exceptions if e.kind == "exception" and e.facts.get("chain") == first.facts.get("chain")]
        root = next((e for e in chain if e.facts.get("root")), None)
        if root is not None and int(root.facts.get("chain_pos") or 0) < int(first.facts.get("chain_pos") or 0):
            return root
    if first.kind == "exception" and not first.frames:
        # the message alone (a paste's title line, a logger's one-line summary) and the same
        # exception printed with its traceback in the same input: the traceback is the error
        full = next((e for e in exceptions if e.kind == "exception" and e.frames and e.loc.source == first.loc.source
                     and e.facts.get("headline") == first.facts.get("headline")), None)
        if full is not None:
            return full
    return first
