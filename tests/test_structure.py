"""The structure stage (structure/) on real runs: records, blocks with exact spans, roles,
streams. Every log here is a real run's output (fixtures/real-runs, made by its make.sh) or is
made by the test itself by running Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from crashlens.model import BlockKind, Role
from crashlens.structure import read_structure
from crashlens.text.normalize import normalize_records

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "real-runs" / "cases"


def structure_of(text: str, name: str = "run.log"):
    lines = [ln for n, raw in enumerate(text.split("\n"), 1) for ln in normalize_records(raw, name, n)]
    return read_structure(lines)


def run_case(slug: str):
    (case,) = RUNS.glob(f"{slug}*")
    return structure_of((case / "input.log").read_text(encoding="utf-8"), "input.log")


def line_no(st, needle: str) -> int:
    return next(ln.loc.line for ln in st.lines if needle in ln.text)


def record_at(st, n: int):
    return next(r for ln, r in zip(st.lines, st.records) if ln.loc.line == n)


def test_faulthandler_dump_is_one_block_with_the_current_threads_frames():
    st = run_case("049-")
    (fh,) = st.of_kind(BlockKind.FAULTHANDLER)
    start = line_no(st, "Fatal Python error: Segmentation fault")
    assert fh.loc.line == start and fh.loc.end_line == line_no(st, 'score.py", line 50 in <module>')
    assert [f.function for f in fh.frames][-2:] == ["record", "string_at"]   # outermost first
    assert record_at(st, start).role == Role.ERROR
    assert record_at(st, start + 2).role == Role.HEADER                          # Current thread 0x…
    assert record_at(st, start + 3).role == Role.FRAME
    # the logging records before it: timestamped, at INFO, each a record of its own
    rec = record_at(st, start - 1)
    assert rec.level == "info" and rec.time.startswith("2026-11-28") and rec.starts


def test_torchrun_summary_and_rank_streams():
    st = run_case("026-")
    (summary,) = st.of_kind(BlockKind.LAUNCHER_SUMMARY)
    assert summary.facts["rank"].startswith("1") and summary.facts["exitcode"].startswith("1")
    assert summary.loc.line == line_no(st, "Root Cause (first observed failure)")
    tb = [b for b in st.of_kind(BlockKind.TRACEBACK) if b.stream == "rank1"]
    assert tb and tb[0].loc.line == next(ln.loc.line for ln in st.lines
                                         if ln.stream == "rank1" and ln.text.startswith("Traceback"))
    assert {s.key for s in st.streams if s.kind == "rank"} >= {"rank1"}
    # a frame line of the rank's traceback is a frame of that block
    frame = record_at(st, tb[0].loc.line + 1)
    assert frame.role == Role.FRAME and st.blocks[frame.block] is tb[0]


def test_warning_and_progress_blocks():
    st = run_case("051-")
    w = st.of_kind(BlockKind.WARNING)[0]
    assert w.facts["type"] == "UserWarning" and w.loc.end_line == w.loc.line + 1
    assert w.frames[0].file == "/home/ml/churn/train.py" and w.frames[0].line == 45
    assert w.frames[0].code.startswith("y = torch.from_numpy")
    assert record_at(st, w.loc.line).level == "warning"
    bars = run_case("001-").of_kind(BlockKind.PROGRESS)
    assert bars and all(b.facts["frames"] >= 1 for b in bars)


def test_chain_links_are_their_own_lines():
    st = run_case("018-")
    tbs = st.of_kind(BlockKind.TRACEBACK)
    linked = [b for b in tbs if b.facts["link"] == "cause"]
    assert linked
    n = line_no(st, "The above exception was the direct cause")
    assert record_at(st, n).role == Role.LINK
    # every traceback's error line is inside its span, with the ERROR role
    for b in tbs:
        assert b.loc.line <= b.facts["exc_line"] <= (b.loc.end_line or b.loc.line)
        if b.facts["type"]:
            assert record_at(st, b.facts["exc_line"]).role == Role.ERROR


def test_a_child_process_traceback_names_its_process(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import multiprocessing as mp\n"
        "def work(path):\n"
        "    open(path).read()\n"
        "if __name__ == '__main__':\n"
        "    print('starting', flush=True)\n"
        "    p = mp.get_context('spawn').Process(target=work, args=('/nonexistent/shard-3.bin',))\n"
        "    p.start(); p.join()\n"
        "    raise SystemExit(f'worker exited with {p.exitcode}')\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    st = structure_of(out.stdout + out.stderr)
    (tb,) = [b for b in st.of_kind(BlockKind.TRACEBACK) if b.facts["type"] == "FileNotFoundError"]
    assert tb.facts["process"].startswith("SpawnProcess-")
    assert any(s.kind == "process" and s.key == tb.facts["process"] for s in st.streams)
    assert record_at(st, tb.loc.line - 1).role == Role.HEADER       # "Process SpawnProcess-1:"


def test_a_message_ends_where_the_next_record_starts():
    st = structure_of("Traceback (most recent call last):\n"
                      '  File "/home/u/train.py", line 3, in <module>\n'
                      "    main()\n"
                      "ValueError: bad shard\n"
                      "the shard header is empty\n"
                      "2026-11-28 03:00:01,000 ERROR job exited with status 1\n")
    (tb,) = st.of_kind(BlockKind.TRACEBACK)
    assert tb.facts["message"] == ("bad shard", "the shard header is empty")
    assert tb.loc.end_line == 5
    assert record_at(st, 6).level == "error" and record_at(st, 6).block == -1


def test_an_uncaught_cpp_exception_is_one_block_ending_at_its_what_line():
    (case,) = (RUNS.parent.parent / "real-runs2" / "cases").glob("024-*")
    st = structure_of((case / "input.log").read_text(encoding="utf-8"), "input.log")
    (tb,) = [b for b in st.of_kind(BlockKind.TRACEBACK) if b.facts["style"] == "c++"]
    assert tb.facts["type"] == "std::out_of_range"
    assert tb.facts["message"][0].startswith("vector::_M_range_check")
    assert tb.loc.line == line_no(st, "terminate called after throwing")
    assert tb.facts["exc_line"] == line_no(st, "what():") == tb.loc.end_line
    assert record_at(st, tb.loc.line).role == Role.HEADER
