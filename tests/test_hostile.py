"""Small versions of the hostile inputs of bench/hostile.py (issue 10, section 1): each must
stay bounded in memory and time, and end as a note or an exit code, never a hang or exit 3."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from crashlens.engine.collect import Collected, read_text_input
from crashlens.inputs import Limits, collect_inputs
from crashlens.inputs.notes import summarise_notes
from crashlens.report.bugreport.templates import MAX_OUTPUT, TemplateError, render_markdown
from crashlens.text.select import SelectStats, select_lines

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import hostile  # noqa: E402


def _lines(data: bytes, **kw) -> tuple[list[tuple[int, str]], SelectStats]:
    st = SelectStats()
    return list(select_lines(io.BytesIO(data), [r"CUDA error"], stats=st, **kw)), st


def test_many_tiny_lines_are_selected_not_held_whole() -> None:
    data = b"\n" * 300_000
    out, st = _lines(data, full_lines=1000, head=10, tail=20)
    assert st.mode == "selected" and st.total_lines == 300_000
    assert [n for n, _ in out] == list(range(1, 11)) + list(range(299_981, 300_001))
    full, st = _lines(b"\n" * 500, full_lines=1000)
    assert st.mode == "full" and len(full) == 500


@pytest.mark.parametrize("size", [3_000_000, 30 << 20])  # below and above full_below (8 MiB)
def test_every_line_a_hit_keeps_the_first_lines_and_the_tail(size: int) -> None:
    line = b"RuntimeError: CUDA error: an illegal memory access was encountered\n"
    data = line * (size // len(line))
    n = data.count(b"\n")
    out, st = _lines(data, full_lines=1000, max_kept=5000, tail=100)
    nums = [k for k, _ in out]
    assert nums == list(range(1, 4901)) + list(range(n - 99, n + 1))
    assert st.dropped_lines > 0 and st.kept_lines == 5000


def test_dense_hits_stop_being_scanned_once_the_quota_is_covered() -> None:
    from crashlens.text import select

    seen = []

    class Spy(select.Saturable):
        def scan(self, mv, start, end):
            seen.append(self.on)
            return super().scan(mv, start, end)

    line = b"CUDA error\n"
    data = line * ((40 << 20) // len(line))
    real = select.Saturable
    select.Saturable = Spy  # type: ignore[misc]
    try:
        from crashlens.text import chunks

        old = chunks.CHUNK_SIZE
        chunks.CHUNK_SIZE = 1 << 20
        try:
            _lines(data, max_kept=1000)
        finally:
            chunks.CHUNK_SIZE = old
    finally:
        select.Saturable = real  # type: ignore[misc]
    assert seen and not seen[-1] and seen.count(False) > seen.count(True)


def test_evidence_is_capped_per_rule() -> None:
    from crashlens.pipeline import text_analyzer

    log = "".join(f"RuntimeError: CUDA error: an illegal memory access was encountered ({i})\n" for i in range(3000))
    analysis = text_analyzer()(log)
    assert analysis.causes
    top = analysis.causes[0]
    assert len(top.evidence) <= 12
    assert any("more matches not kept" in r for r in top.reasoning)


def _overlap_zip(n: int, member: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("m0000.log", member)
    data = buf.getvalue()
    end = data.rindex(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack_from("<II", data, end + 12)
    cd = data[cd_offset:cd_offset + cd_size]
    body = data[:cd_offset] + b"".join(cd.replace(b"m0000.log", b"m%04d.log" % i) for i in range(n))
    return body + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(body) - cd_offset, cd_offset, 0)


def test_zip_overlapping_entries_are_read_once(tmp_path: Path) -> None:
    p = tmp_path / "overlap.zip"
    p.write_bytes(_overlap_zip(300, b"step 1 loss 0.5\n" * 1000))
    inputs, notes = collect_inputs([p])
    assert [f.name for f in inputs] == [f"{p}!m0000.log"]
    assert any("overlaps another member" in n for n in notes)
    assert len(notes) <= 7  # summarised


def test_archive_content_budget(tmp_path: Path) -> None:
    p = tmp_path / "many.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(10):
            z.writestr(f"f{i}.log", b"x" * 1000 + b"\n")
    inputs, notes = collect_inputs([p], Limits(max_archive_bytes=3500))
    assert len(inputs) == 3
    assert any("archive content beyond 3500 bytes" in n for n in notes)


def test_compressed_input_is_read_up_to_its_limit(tmp_path: Path) -> None:
    import gzip

    p = tmp_path / "big.log.gz"
    p.write_bytes(gzip.compress(b"step 1 loss 0.5\n" * 100_000))
    [inp], _ = collect_inputs([p], Limits(max_stream_bytes=160_000))
    with inp.open() as f:
        data = f.read()
        assert len(data) == 160_000
        assert "beyond" in (f.error or "")
    [inp], _ = collect_inputs([p], Limits(max_stream_bytes=1_600_000))
    with inp.open() as f:
        assert len(f.read()) == 1_600_000 and f.error is None  # exactly the limit: complete


@pytest.mark.timeout(60)  # a hang fails here; how fast it is, bench/hostile.py says
def test_fifo_without_writer_does_not_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import crashlens.inputs.collect as collect_module

    monkeypatch.setattr(collect_module, "_PIPE_WAIT", 0.2)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    [inp], notes = collect_inputs([fifo])
    assert inp.kind == "empty" and "no writer" in notes[0]


def test_named_fifo_with_a_late_writer_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def writer() -> None:
        time.sleep(0.3)
        with open(fifo, "wb") as f:
            f.write(b"RuntimeError: boom\n")

    t = threading.Thread(target=writer)
    t.start()
    [inp], _ = collect_inputs([fifo])
    t.join(5)
    assert inp.kind == "text"


def test_folder_walk_refuses_devices_fifos_and_links_leaving_it(tmp_path: Path) -> None:
    b = tmp_path / "bundle"
    b.mkdir()
    (b / "run.log").write_text("ok\n")
    (b / "inside.log").symlink_to(b / "run.log")
    os.symlink("/dev/zero", b / "zero.log")
    os.mkfifo(b / "pipe.log")
    os.symlink(b / "pipe.log", b / "pipe-link.log")
    os.symlink("/proc/self/environ", b / "env.log")
    os.symlink("/etc/passwd", b / "passwd.log")
    (tmp_path / "outside.log").write_text("secret\n")
    os.symlink(tmp_path / "outside.log", b / "out.log")
    inputs, notes = collect_inputs([b])
    assert sorted(f.name for f in inputs) == [f"{b}/inside.log", f"{b}/run.log"]
    for name in ("zero.log", "env.log", "passwd.log", "out.log"):
        assert f"{b}/{name}: skipped, symlink that leaves the folder" in notes
    assert f"{b}/pipe.log: skipped, not a regular file" in notes
    assert f"{b}/pipe-link.log: skipped, not a regular file" in notes


@pytest.mark.timeout(60)  # a hang fails here; how fast it is, bench/hostile.py says
def test_triage_hash_opens_no_fifo_or_device(tmp_path: Path) -> None:
    from crashlens.triage import content_hash

    b = tmp_path / "bundle"
    b.mkdir()
    (b / "run.log").write_text("x\n")
    os.mkfifo(b / "pipe.log")
    os.symlink("/dev/zero", b / "zero.log")
    os.symlink(b / "pipe.log", b / "pipe-link.log")
    h = content_hash(str(b))
    assert len(h) == 64


def test_many_small_files_cost_no_chunk_buffer_each(tmp_path: Path) -> None:
    import tracemalloc

    d = tmp_path / "files"
    d.mkdir()
    for i in range(200):
        (d / f"f{i:04d}.log").write_bytes(b"step %d\n" % i)
    inputs, _ = collect_inputs([d])
    tracemalloc.start()
    out = Collected()
    for inp in inputs:
        read_text_input(inp, [], 8 << 20, out)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(out.lines) == 200 and peak < 8 << 20


def test_repeated_notes_are_summarised() -> None:
    notes = [f"a.zip!{i}.zip: archive nested deeper than 4 levels; not opened" for i in range(1000)]
    notes += ["x.log: empty file, skipped", "no name here"]
    out = summarise_notes(notes)
    assert len(out) == 8
    assert out[-1] == "… and 995 more inputs like the above: archive nested deeper than 4 levels; not opened"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("source, message", [
    ("{{ 'A' * 10**10 }}", "repeated"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", "wrote more than"),
    ("{% for i in range(10**9) %}x{% endfor %}", "above the limit"),
    ("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", "recursion"),
    ("{{ 'x'|center(10**10) }}", "above the limit"),
    ("{{ 'x'.ljust(10**10) }}", "above the limit"),
    ("{{ '{:>9999999999}'.format(1) }}", "width"),
    ("{{ '%9999999999s' % 1 }}", "width"),
    ("{{ 10**(10**10) }}", "power"),
    ("{{ [1] * 10**10 }}", "repeated"),
])
def test_template_bombs_are_template_errors(source: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        render_markdown(source, "t.md", {"a": 1})


def test_template_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import crashlens.report.bugreport.templates as templates

    monkeypatch.setattr(templates, "MAX_SECONDS", 0.5)
    with pytest.raises(TemplateError, match="ran longer than"):
        render_markdown("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                        "t.md", {})


def test_ordinary_templates_still_render() -> None:
    out = render_markdown("{{ a.b }} {{ 'x' * 3 }} {{ 2**10 }} {{ '%5s'|format('a') }} {{ range(3)|list }}",
                          "t.md", {"a": {"b": 1}})
    assert out == "1 xxx 1024     a [0, 1, 2]" and MAX_OUTPUT >= 1 << 20


def test_cli_template_bomb_exits_2(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    t = tmp_path / "t.md"
    t.write_text("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}\n")
    r = subprocess.run([sys.executable, "-m", "crashlens", "report", "--template", str(t), str(log)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "recursion" in r.stderr


def test_inspect_image_declaring_1gib_is_refused_before_decompressing(tmp_path: Path) -> None:
    from crashlens.binary.fatbin import FatbinError
    from crashlens.inspect import image_header

    p = tmp_path / "libbomb.so"
    p.write_bytes(hostile.fatbin_elf(1 << 30))
    with pytest.raises(FatbinError, match="over the limit"):
        image_header(p, 0)


def test_dense_hits_parallel_equals_sequential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from crashlens.text import chunks, parallel

    monkeypatch.setattr(parallel, "MIN_RANGE", 1 << 20)
    monkeypatch.setattr(chunks, "CHUNK_SIZE", 1 << 20)
    p = tmp_path / "dense.log"
    p.write_bytes(b"".join(b"CUDA error %d\n" % i for i in range(2_000_000)))

    def run() -> tuple[list[tuple[int, str]], SelectStats]:
        st = SelectStats()
        with open(p, "rb") as f:
            return list(select_lines(f, [r"CUDA error"], full_below=1 << 20, max_kept=3000, tail=500,
                                     stats=st)), st

    monkeypatch.setenv("CRASHLENS_SELECT_PROCS", "2")
    par, st_par = run()
    monkeypatch.setenv("CRASHLENS_SELECT_PROCS", "1")
    seq, st_seq = run()
    assert par == seq and len(par) == 3000
    assert [n for n, _ in par] == list(range(1, 2501)) + list(range(1_999_501, 2_000_001))


@pytest.mark.parametrize("name", ["deep.ipynb", "attempt_0/1/error.json"])
def test_json_inputs_nested_past_the_parser_are_a_note(tmp_path: Path, name: str) -> None:
    """A notebook or torchelastic error file nested 200,000 levels deep: a note, never exit 3."""
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    body = "[" * 200000 + "]" * 200000
    p.write_text('{"cells": ' + body + "}" if name.endswith(".ipynb")
                 else '{"message": {"extraInfo": {"py_callstack": ' + body + "}}}")
    from crashlens.pipeline import analyze_paths

    a = analyze_paths([p])
    assert any("could not be read as one" in n for n in a.notes), a.notes
