"""NCCL Flight Recorder dumps (parsers/flightrecorder.py): real dumps of a two-rank hang and a
size mismatch made through `crashlens run` on two H200s (fixtures/run-bundles-nccl,
bench/run/gpuruns2.sh), read without executing anything and compared across ranks."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from crashlens.parsers.flightrecorder import DumpError, compare, load_dump, read_dump
from crashlens.pipeline import analyze_paths

NCCL = Path(__file__).resolve().parents[1] / "fixtures" / "run-bundles-nccl"


def dumps(case: str, ranks=(0, 1)):
    return [read_dump((NCCL / case / f"nccl_trace_rank_{r}").read_bytes(), f"{case}/nccl_trace_rank_{r}") for r in ranks]


def raw(case: str, rank: int) -> dict:
    return load_dump((NCCL / case / f"nccl_trace_rank_{rank}").read_bytes())


def test_real_dumps_are_typed_records():
    d0, d1 = dumps("hang")
    assert (d0.rank, d1.rank) == (0, 1) and d0.version == "2.10"
    assert d0.pg_ranks["0"] == (0, 1) and d0.status["0"]["last_enqueued_collective"] == 4
    last = d0.entries[-1]
    assert (last.seq, last.op, last.state, last.input_sizes, last.input_dtypes) == (4, "nccl:all_reduce", "scheduled", ((1024,),), ("Float",))
    assert last.frames[-1].function == "all_reduce" and last.frames[0].file.endswith("train.py")


def test_a_rank_that_never_joined_is_named_with_where_it_was():
    (ev,) = compare(dumps("hang"))
    f = ev.facts
    assert (f["reason"], f["seq"], f["suspect_ranks"], f["waiting_ranks"]) == ("never-joined", 4, "1", "0")
    assert "train.py:18" in f["culprit_last"] and f["last_completed"] == 3


def test_a_size_mismatch_is_named_and_the_rank_that_changed_is_the_suspect():
    (ev,) = compare(dumps("mismatch"))
    f = ev.facts
    assert f["reason"] == "sizes-mismatch" and f["seq"] == 3 and f["suspect_ranks"] == "1"
    assert "[[2048]]" in f["mismatch"] and "[[1024]]" in f["mismatch"]


def test_a_truncated_ring_buffer_is_not_a_missing_rank():
    doc = raw("hang", 1)
    doc["entries"] = doc["entries"][2:]          # rank 1's buffer kept only its last collective
    short = read_dump(pickle.dumps(doc), "hang/nccl_trace_rank_1")
    (ev,) = compare([dumps("hang", (0,))[0], short])
    assert ev.facts["reason"] == "never-joined" and ev.facts["seq"] == 4 and ev.facts["suspect_ranks"] == "1"


def test_a_missing_dump_is_said_plainly():
    (ev,) = compare(dumps("hang", (0,)))
    assert ev.facts["reason"] == "agree" and ev.facts["suspect_ranks"] == "1"
    assert "cannot tell" in ev.text and "no dump of rank(s) 1" in ev.text


def test_nothing_in_a_pickle_is_executed(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            import os
            return (os.system, (f"touch {marker}",))

    data = pickle.dumps({"version": "2.10", "entries": [Evil()]})
    with pytest.raises(DumpError, match="refused"):
        load_dump(data)
    assert not marker.exists()


def test_shared_references_and_sizes_are_bounded():
    node = [0]
    for _ in range(40):                             # 2**40 values if walked whole; 40 lists on disk
        node = [node, node]
    entry = {"collective_seq_id": 1, "profiling_name": "nccl:all_reduce", "state": "completed",
             "input_sizes": node, "frames": node, "input_dtypes": node}
    got = read_dump(pickle.dumps({"entries": [entry, entry], "pg_status": {"0": {}}}), "nccl_trace_rank_0")
    assert len(got.entries) == 2 and len(got.entries[0].input_sizes) <= 64   # read within bounds, not walked
    many = pickle.dumps({"entries": [entry] * 2_000_001})
    with pytest.raises(DumpError, match="entries"):
        read_dump(many, "nccl_trace_rank_0")
    with pytest.raises(DumpError, match="larger than"):
        load_dump(b"\x80\x04" + b"\0" * (65 << 20))


def test_bundles_with_dumps_are_analysed_and_the_json_form_too(tmp_path):
    a = analyze_paths([NCCL / "hang"])
    assert a.causes[0].category == "collective-timeout-or-failure"
    assert any("Flight Recorder dump of rank 1" in n for n in a.notes)
    fr = [e for c in a.causes for e in c.evidence if e.facts.get("source") == "flight-recorder"]
    assert fr and fr[0].facts["suspect_ranks"] == "1"
    b = analyze_paths([NCCL / "mismatch"])
    assert b.causes[0].rule == "collective-mismatch"
    for r in (0, 1):                                # the JSON form, without the logs
        (tmp_path / f"fr_rank_{r}.json").write_text(json.dumps(raw("hang", r)))
    c = analyze_paths([tmp_path])
    assert c.causes[0].category == "collective-timeout-or-failure"
