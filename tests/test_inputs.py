"""Tests for crashlens.inputs: detection by content, codecs, archives, limits, hostile input.

Every file here is built for real in tmp_path (real gzip/xz/bz2/zstd/lz4 streams, real zip
and tar archives, a real ELF and, where the machine allows, a real core dump).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import threading
import tracemalloc
import zipfile
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:
    import crashlens.inputs  # noqa: F401
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from crashlens.inputs import DEFAULT_LIMITS, DecodingReader, Limits, classify, collect_inputs
from crashlens.model import InputFile

from .conftest import bytes_read

LOG = b"".join(b"step %d loss 0.%04d\n" % (i, i) for i in range(2000)) + b"RuntimeError: CUDA error: out of memory\n"

COMPRESSORS = {
    "gzip": gzip.compress,
    "xz": lambda data: lzma.compress(data, preset=1),
    "bz2": bz2.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
    "lz4": lz4.frame.compress,
}


def by_name(inputs: list[InputFile]) -> dict[str, InputFile]:
    return {f.name: f for f in inputs}


def read_all(f: InputFile) -> tuple[bytes, str | None]:
    stream = f.open()
    try:
        data = stream.read()
        return data, stream.error  # type: ignore[attr-defined]
    finally:
        stream.close()


def tar_bytes(members: dict[str, bytes], compress: str = "") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return COMPRESSORS[compress](raw) if compress else raw


def zip_bytes(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


# -- detection by content ---------------------------------------------------------------------


def test_kinds_are_detected_from_content_not_names(tmp_path: Path) -> None:
    (tmp_path / "run.log").write_bytes(gzip.compress(LOG))  # gzip named .log
    (tmp_path / "core.zip").write_bytes(b"just a text file\n")  # text named like an archive
    (tmp_path / "notes.txt").write_bytes(os.urandom(4096))  # garbage named .txt
    (tmp_path / "empty.gz").write_bytes(b"")
    (tmp_path / "win.log").write_bytes("\ufeffWindows log\r\nline two\r\n".encode("utf-16-le"))
    (tmp_path / "latin.log").write_bytes("caf\xe9 cr\xe8me erreur\n".encode("latin-1") * 10)

    inputs, notes = collect_inputs([tmp_path / n for n in ("run.log", "core.zip", "notes.txt", "empty.gz",
                                                             "win.log", "latin.log")])
    kinds = {Path(f.name).name: (f.kind, dict(f.facts)) for f in inputs}
    assert kinds["run.log"][0] == "text" and kinds["run.log"][1]["codecs"] == ["gzip"]
    assert kinds["core.zip"] == ("text", {"encoding": "utf-8"})
    assert kinds["notes.txt"][0] == "binary"
    assert kinds["empty.gz"][0] == "empty"
    assert kinds["win.log"] == ("text", {"encoding": "utf-16-le"})
    assert kinds["latin.log"] == ("text", {"encoding": "8bit"})
    assert notes == []
    gz = by_name(inputs)[str(tmp_path / "run.log")]
    assert gz.size is None  # decompressed size is not known cheaply
    assert read_all(gz) == (LOG, None)


def test_classify_text_with_crash_hole_and_ansi() -> None:
    # A log cut by a crash often ends in a block of NUL bytes; ANSI colours are text too.
    assert classify(b"\x1b[31mERROR\x1b[0m boom\n" * 50 + b"\0" * 4096)[0] == "text"
    assert classify(b"\0" * 4096)[0] == "binary"
    assert classify(bytes(range(256)) * 16)[0] == "binary"
    assert classify(b"")[0] == "empty"
    # A prefix cut in the middle of a UTF-8 character is still UTF-8.
    assert classify("ошибка\n".encode() * 10 + "ш".encode()[:1]) == ("text", {"encoding": "utf-8"})


@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
def test_every_codec_is_undone_and_reopenable(tmp_path: Path, codec: str) -> None:
    path = tmp_path / "blob"
    path.write_bytes(COMPRESSORS[codec](LOG))
    inputs, notes = collect_inputs([path])
    assert notes == []
    [f] = inputs
    assert (f.kind, f.facts["codecs"]) == ("text", [codec])
    assert read_all(f) == (LOG, None)
    assert read_all(f) == (LOG, None)  # a fresh stream each time


def test_concatenated_streams_and_double_compression(tmp_path: Path) -> None:
    (tmp_path / "multi.gz").write_bytes(gzip.compress(b"first\n") + gzip.compress(b"second\n") + b"\0" * 16)
    (tmp_path / "double").write_bytes(lzma.compress(gzip.compress(LOG)))
    (tmp_path / "frames.zst").write_bytes(zstandard.ZstdCompressor().compress(b"a\n") +
                                          zstandard.ZstdCompressor().compress(b"b\n"))
    (tmp_path / "frames.lz4").write_bytes(lz4.frame.compress(b"c\n") + lz4.frame.compress(b"d\n"))
    inputs, notes = collect_inputs([tmp_path / "multi.gz", tmp_path / "double", tmp_path / "frames.zst",
                                    tmp_path / "frames.lz4"])
    assert notes == []
    multi, double, frames, lz4_frames = inputs
    assert read_all(lz4_frames) == (b"c\nd\n", None)
    assert read_all(multi) == (b"first\nsecond\n", None)
    assert double.facts["codecs"] == ["xz", "gzip"] and read_all(double) == (LOG, None)
    assert read_all(frames) == (b"a\nb\n", None)


def _compile(tmp_path: Path, source: str, name: str) -> Path | None:
    gcc = shutil.which("gcc")
    if not gcc:
        return None
    (tmp_path / f"{name}.c").write_text(source)
    result = subprocess.run([gcc, "-O0", "-o", str(tmp_path / name), str(tmp_path / f"{name}.c")],
                            capture_output=True, timeout=60)
    return tmp_path / name if result.returncode == 0 else None


def test_elf_executable(tmp_path: Path) -> None:
    exe = _compile(tmp_path, "int main(void){return 0;}\n", "tiny") or Path(sys.executable).resolve()
    inputs, notes = collect_inputs([exe])
    [f] = inputs
    assert f.kind == "elf"
    assert f.facts["elf_class"] in (32, 64)
    assert f.facts["elf_type"] in ("exec", "dyn")
    assert f.facts["e_type"] in (2, 3)
    assert f.facts["elf_machine"] and f.facts["e_machine"] > 0
    assert f.size == exe.stat().st_size


def test_real_core_dump_plain_and_compressed_in_archive(tmp_path: Path) -> None:
    crash = _compile(tmp_path, "int main(){*(volatile int*)0=0;return 0;}\n", "crash")
    if crash is None:
        pytest.skip("gcc not available")
    subprocess.run(["bash", "-c", "ulimit -c unlimited; ./crash"], cwd=tmp_path, capture_output=True, timeout=60)
    cores = sorted(p for p in tmp_path.iterdir() if p.name == "core" or p.name.startswith("core."))
    if not cores:
        pytest.skip("no core file appeared (core_pattern or ulimit does not allow it here)")
    core = cores[0]
    data = core.read_bytes()
    (tmp_path / "dump.tar.zst").write_bytes(tar_bytes({"ranks/0/core": data}, "zstd"))
    (tmp_path / "core.zst").write_bytes(zstandard.ZstdCompressor().compress(data))

    inputs, notes = collect_inputs([core, tmp_path / "core.zst", tmp_path / "dump.tar.zst"])
    assert notes == []
    plain, zst, member = inputs
    for f in inputs:
        assert f.kind == "elf-core"
        assert f.facts["e_type"] == 4 and f.facts["elf_type"] == "core"
    assert member.name == f"{tmp_path / 'dump.tar.zst'}!ranks/0/core"
    assert member.size == len(data)
    assert read_all(member) == (data, None)
    assert zst.facts["codecs"] == ["zstd"]


# -- unreadable things -----------------------------------------------------------------------


def test_nonexistent_path_is_an_unreadable_input(tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    inputs, notes = collect_inputs([missing, tmp_path / "also" / "missing"])
    assert [f.kind for f in inputs] == ["unreadable", "unreadable"]
    assert inputs[0].name == str(missing)
    assert "No such file" in inputs[0].note
    assert notes[0] == f"{missing}: unreadable: No such file or directory"
    stream = inputs[0].open()
    assert stream.read() == b""
    assert "No such file" in stream.error  # type: ignore[attr-defined]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads everything")
def test_permission_denied(tmp_path: Path) -> None:
    secret = tmp_path / "secret.log"
    secret.write_text("x\n")
    secret.chmod(0)
    try:
        inputs, notes = collect_inputs([secret, tmp_path])
    finally:
        secret.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert [f.kind for f in inputs] == ["unreadable", "unreadable"]
    assert "Permission denied" in inputs[0].note and len(notes) == 2


def test_unreadable_files_and_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulated so that it also holds when the tests run as root (who may read anything).
    import crashlens.inputs.collect as collect_module

    root = tmp_path / "logs"
    (root / "locked").mkdir(parents=True)
    (root / "secret.log").write_text("x\n")
    (root / "ok.log").write_text("fine\n")
    real_open, real_scandir = collect_module._open_regular, os.scandir

    def fake_open(path: str) -> object:
        if str(path).endswith("secret.log"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path)

    def fake_scandir(path: str) -> object:
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(collect_module, "_open_regular", fake_open)
    monkeypatch.setattr(collect_module.os, "scandir", fake_scandir)
    inputs, notes = collect_inputs([root, root / "secret.log"])
    assert [(f.name, f.kind) for f in inputs] == [
        (f"{root}/ok.log", "text"), (f"{root}/secret.log", "unreadable"), (f"{root}/secret.log", "unreadable"),
    ]
    assert inputs[1].note == "Permission denied"
    assert notes == [
        f"{root}/locked: cannot list directory: Permission denied",
        f"{root}/secret.log: unreadable: Permission denied",
        f"{root}/secret.log: unreadable: Permission denied",
    ]


def test_named_pipe_given_on_the_command_line(tmp_path: Path) -> None:
    fifo = tmp_path / "stdin"
    os.mkfifo(fifo)

    def writer() -> None:
        with open(fifo, "wb") as f:
            f.write(gzip.compress(LOG))

    thread = threading.Thread(target=writer)
    thread.start()
    inputs, notes = collect_inputs([fifo])
    thread.join(10)
    [f] = inputs
    assert (f.kind, f.facts["codecs"]) == ("text", ["gzip"])
    assert read_all(f) == (LOG, None)  # read once, kept in memory: it can be reopened


def test_directory_walk_sorted_regular_files_only(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    (root / "b").mkdir(parents=True)
    (root / "a.log").write_text("a\n")
    (root / "b" / "rank1.log").write_text("r1\n")
    (root / "b" / "rank0.log").write_text("r0\n")
    (root / "c.log.gz").write_bytes(gzip.compress(b"c\n"))
    (root / "b" / "up").symlink_to(root)  # a loop through a symlink: not followed
    (root / "link.log").symlink_to(root / "a.log")  # a symlink to a file is read
    (root / "dangling").symlink_to(tmp_path / "gone")
    os.mkfifo(root / "pipe")  # never opened (it would block)
    inputs, notes = collect_inputs([root])
    assert [f.name for f in inputs] == [
        f"{root}/a.log", f"{root}/b/rank0.log", f"{root}/b/rank1.log", f"{root}/c.log.gz", f"{root}/link.log",
    ]
    assert all(f.kind == "text" for f in inputs)
    assert read_all(inputs[3]) == (b"c\n", None)
    assert f"{root}/b/up: skipped, symlink to a directory" in notes
    assert f"{root}/dangling: skipped, broken symlink" in notes
    assert f"{root}/pipe: skipped, not a regular file" in notes


def test_detection_reads_only_a_prefix(tmp_path: Path) -> None:
    big = tmp_path / "huge.log"
    with open(big, "wb") as f:
        f.write(b"NCCL WARN timeout\n" * 100)
        f.truncate(2 * 1024**3)  # a sparse 2 GiB file
    (inputs, _), read = bytes_read(lambda: collect_inputs([big]))
    assert read < 16 << 20, f"{read} bytes read of a 2 GiB file"
    assert inputs[0].kind == "text" and inputs[0].size == 2 * 1024**3


# -- archives --------------------------------------------------------------------------------


def test_nested_archives_are_opened_and_members_reopen_later(tmp_path: Path) -> None:
    deep = zip_bytes({"log.txt": LOG, "sub/dir/": b""})
    inner = tar_bytes({"./inner.zip": deep, "stderr.txt": b"Segmentation fault\n"}, "gzip")
    outer = tmp_path / "bundle"  # name says nothing: a zip holding a tar.gz holding a zip
    outer.write_bytes(zip_bytes({"inner.tar.gz": inner, "rank0.log.xz": lzma.compress(LOG)}))
    inputs, notes = collect_inputs([outer])
    assert notes == []
    found = by_name(inputs)
    log = found[f"{outer}!inner.tar.gz!inner.zip!log.txt"]
    assert (log.kind, log.size) == ("text", len(LOG))
    assert found[f"{outer}!inner.tar.gz!stderr.txt"].kind == "text"
    xz = found[f"{outer}!rank0.log.xz"]
    assert xz.facts["codecs"] == ["xz"]
    assert len(inputs) == 3
    # open() works after collect_inputs returned, repeatedly, through the whole chain.
    assert read_all(log) == (LOG, None)
    assert read_all(log) == (LOG, None)
    assert read_all(xz) == (LOG, None)


def test_plain_tar_members_are_slices_and_tar_zst_streams(tmp_path: Path) -> None:
    members = {f"rank{i}.log": b"rank %d ok\n" % i for i in range(5)}
    (tmp_path / "a.tar").write_bytes(tar_bytes(members))
    (tmp_path / "b.tar.zst").write_bytes(tar_bytes(members, "zstd"))
    inputs, notes = collect_inputs([tmp_path / "a.tar", tmp_path / "b.tar.zst"])
    assert notes == []
    assert len(inputs) == 10
    for f in inputs:
        member = f.name.rsplit("!", 1)[1]
        assert f.kind == "text" and f.size == len(members[member])
        assert read_all(f) == (members[member], None)


def test_tar_links_devices_and_dotdot_names(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, kind in (("evil", tarfile.SYMTYPE), ("hard", tarfile.LNKTYPE), ("dev", tarfile.CHRTYPE),
                           ("fifo", tarfile.FIFOTYPE)):
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = "/etc/passwd" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
            tf.addfile(info)
        info = tarfile.TarInfo("../../escape.log")
        data = b"outside?\n"
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    archive = tmp_path / "run.tar.gz"
    archive.write_bytes(buf.getvalue())
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    inputs, notes = collect_inputs([archive])
    assert f"{archive}!evil: skipped, symlink -> /etc/passwd" in notes
    assert f"{archive}!hard: skipped, hardlink -> /etc/passwd" in notes
    assert f"{archive}!dev: skipped, device" in notes
    assert f"{archive}!fifo: skipped, fifo" in notes
    [f] = inputs
    assert f.name == f"{archive}!../../escape.log"  # just a name
    assert read_all(f) == (data, None)
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before  # nothing written anywhere
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.tar.gz"]


def test_zip_symlink_member_is_skipped(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        link = zipfile.ZipInfo("link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/shadow")
        zf.writestr("ok.txt", "fine\n")
    (tmp_path / "x.zip").write_bytes(buf.getvalue())
    inputs, notes = collect_inputs([tmp_path / "x.zip"])
    assert [f.name.rsplit("!", 1)[1] for f in inputs] == ["ok.txt"]
    assert notes == [f"{tmp_path / 'x.zip'}!link: skipped, symlink"]


def test_zip_bomb_member_streams_without_reading_it_all(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.zip"
    chunk = b"A" * (1 << 20)
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("huge.log", "w", force_zip64=True) as member:
            for _ in range(256):  # 256 MiB in about 1 MiB
                member.write(chunk)
    assert bomb.stat().st_size < 4 << 20
    tracemalloc.start()
    try:
        inputs, notes = collect_inputs([bomb])
        [f] = inputs
        stream = f.open()
        first = stream.read(1 << 20)
        _, peak = tracemalloc.get_traced_memory()
        stream.close()
    finally:
        tracemalloc.stop()
    assert notes == []
    assert (f.kind, f.size) == ("text", 256 << 20)
    assert first == chunk
    assert peak < 16 << 20  # nowhere near the 256 MiB it expands to


def test_nested_archive_with_huge_ratio_is_not_opened(tmp_path: Path) -> None:
    inner = zip_bytes({"zeros": b"\0" * (4 << 20)}, zipfile.ZIP_STORED)  # 4 MiB, compresses ~1000x
    outer = tmp_path / "o.zip"
    outer.write_bytes(zip_bytes({"inner.zip": inner}))
    inputs, notes = collect_inputs([outer])
    [f] = inputs
    assert f.name == f"{outer}!inner.zip"
    assert f.kind == "binary" and f.facts["container"] == "zip"
    assert "compression ratio" in f.note and "exceeds limit 200" in f.note
    assert notes == [f"{f.name}: {f.note}"]
    relaxed, _ = collect_inputs([outer], Limits(max_ratio=1e6))
    assert [g.name for g in relaxed] == [f"{outer}!inner.zip!zeros"]


def test_compression_layers_limit_and_one_line_names(tmp_path: Path) -> None:
    data = b"deep\n"
    for _ in range(4):
        data = gzip.compress(data)
    (tmp_path / "onion").write_bytes(data)
    (tmp_path / "names.zip").write_bytes(zip_bytes({"evil\nname.log": b"x\n"}))
    inputs, notes = collect_inputs([tmp_path / "onion", tmp_path / "names.zip"], Limits(max_codec_layers=2))
    onion, member = inputs
    assert onion.kind == "binary" and onion.facts == {"codecs": ["gzip", "gzip"], "codec": "gzip"}
    assert "compressed more than 2 times over" in onion.note
    assert member.name == f"{tmp_path / 'names.zip'}!evil\\x0aname.log"
    assert read_all(member) == (b"x\n", None)
    assert all("\n" not in n for n in notes)
    full, _ = collect_inputs([tmp_path / "onion"])
    assert read_all(full[0]) == (b"deep\n", None) and full[0].facts["codecs"] == ["gzip"] * 4


def test_member_count_over_limit(tmp_path: Path) -> None:
    members = {f"m{i:02}.log": b"line\n" for i in range(30)}
    (tmp_path / "many.zip").write_bytes(zip_bytes(members))
    (tmp_path / "many.tar.bz2").write_bytes(tar_bytes(members, "bz2"))
    limits = Limits(max_members=10)
    inputs, notes = collect_inputs([tmp_path / "many.zip", tmp_path / "many.tar.bz2"], limits)
    assert len(inputs) == 20
    assert notes == [
        f"{tmp_path / 'many.zip'}: member count 30 exceeds limit 10; first 10 read",
        f"{tmp_path / 'many.tar.bz2'}: more than 10 members; first 10 read",
    ]
    assert inputs[9].name.endswith("!m09.log") and inputs[19].name.endswith("!m09.log")


def test_nesting_beyond_max_depth(tmp_path: Path) -> None:
    level3 = zip_bytes({"log.txt": LOG})
    level2 = tar_bytes({"l3.zip": level3}, "gzip")
    (tmp_path / "l1.zip").write_bytes(zip_bytes({"l2.tgz": level2}))
    inputs, notes = collect_inputs([tmp_path / "l1.zip"], Limits(max_depth=2))
    [f] = inputs
    assert f.name == f"{tmp_path / 'l1.zip'}!l2.tgz!l3.zip"
    assert f.kind == "binary" and "nested deeper than 2" in f.note
    assert len(notes) == 1 and "not opened" in notes[0]
    # open() still returns the unopened archive's bytes
    assert read_all(f) == (level3, None)
    full, _ = collect_inputs([tmp_path / "l1.zip"], DEFAULT_LIMITS)
    assert [g.name for g in full] == [f"{tmp_path / 'l1.zip'}!l2.tgz!l3.zip!log.txt"]
    none, _ = collect_inputs([tmp_path / "l1.zip"], Limits(max_depth=0))
    assert [(g.name, g.kind) for g in none] == [(str(tmp_path / "l1.zip"), "binary")]


# -- truncation and corruption ---------------------------------------------------------------


@pytest.mark.parametrize("codec", ["gzip", "xz", "zstd", "bz2", "lz4"])
def test_truncated_stream_yields_what_decodes_and_says_so(tmp_path: Path, codec: str) -> None:
    data = b"".join(b"%08d some log text that goes on\n" % i for i in range(100_000))  # ~3.6 MB
    packed = COMPRESSORS[codec](data)
    path = tmp_path / "cut"
    path.write_bytes(packed[: len(packed) * 2 // 3])
    inputs, notes = collect_inputs([path])
    [f] = inputs
    assert f.kind == "text"
    stream = f.open()
    got = stream.read()  # raises nothing
    assert 0 < len(got) < len(data) and data.startswith(got)
    assert stream.truncated  # type: ignore[attr-defined]
    assert f"{codec} stream truncated" in stream.error  # type: ignore[attr-defined]


def test_small_truncated_gzip_is_noted_at_collection(tmp_path: Path) -> None:
    packed = gzip.compress(LOG)
    path = tmp_path / "run.log.gz"
    path.write_bytes(packed[:-20])
    inputs, notes = collect_inputs([path])
    [f] = inputs
    assert f.kind == "text" and f.facts["truncated"] is True
    assert "gzip stream truncated" in f.note
    assert notes == [f"{path}: {f.note}"]
    data, error = read_all(f)
    assert LOG.startswith(data) and len(data) > 0 and error is not None


def test_gzip_with_bad_crc_keeps_all_its_data() -> None:
    packed = bytearray(gzip.compress(b"short log\n"))
    packed[-8] ^= 0xFF  # CRC32 in the trailer
    reader = DecodingReader(io.BytesIO(bytes(packed)), "gzip")
    assert reader.read() == b"short log\n"
    assert reader.error is not None and "CRC check failed" in reader.error


def test_corrupt_gzip_sets_error() -> None:
    packed = bytearray(gzip.compress(LOG))
    packed[len(packed) // 2:len(packed) // 2 + 8] = b"\xff" * 8
    reader = DecodingReader(io.BytesIO(bytes(packed)), "gzip")
    out = reader.read()
    assert len(out) < len(LOG)
    assert reader.error is not None and "gzip stream corrupt" in reader.error
    assert reader.truncated


def test_truncated_tar_gz_keeps_members_read_before(tmp_path: Path) -> None:
    members = {f"f{i}.log": os.urandom(20_000).hex().encode() for i in range(6)}
    packed = tar_bytes(members, "gzip")
    path = tmp_path / "cut.tar.gz"
    path.write_bytes(packed[: len(packed) // 2])
    inputs, notes = collect_inputs([path])
    assert 1 <= len(inputs) < 6
    assert inputs[0].name == f"{path}!f0.log" and read_all(inputs[0]) == (members["f0.log"], None)
    assert len(notes) >= 1
    assert notes[-1].startswith(f"{path}: gzip stream truncated") and "members read before it" in notes[-1]


def test_small_truncated_tar_gz(tmp_path: Path) -> None:
    packed = tar_bytes({"a.log": b"alpha\n", "b.log": b"beta\n" * 2000}, "gzip")
    path = tmp_path / "small.tgz"
    path.write_bytes(packed[: len(packed) - 12])  # the trailer and a little data gone
    inputs, notes = collect_inputs([path])
    assert inputs[0].name == f"{path}!a.log" and read_all(inputs[0]) == (b"alpha\n", None)
    assert notes[-1].startswith(f"{path}: gzip stream truncated")


def test_zip_inside_a_compressed_stream_is_buffered(tmp_path: Path) -> None:
    path = tmp_path / "logs.zip.xz"
    path.write_bytes(lzma.compress(zip_bytes({"r0.log": LOG, "r1.log": b"r1\n"})))
    inputs, notes = collect_inputs([path])
    assert notes == []
    assert [f.name for f in inputs] == [f"{path}!r0.log", f"{path}!r1.log"]
    assert read_all(inputs[0]) == (LOG, None)
    small, notes = collect_inputs([path], Limits(max_member_bytes=1000))
    assert small[0].kind == "binary" and "zip not opened: more than 1000 bytes" in small[0].note
    assert notes == [f"{path}: {small[0].note}"]


def test_corrupt_archives_are_notes_not_exceptions(tmp_path: Path) -> None:
    (tmp_path / "bad.zip").write_bytes(b"PK\x03\x04" + os.urandom(1000))
    good = zip_bytes({"a.log": LOG})
    (tmp_path / "cut.zip").write_bytes(good[:-30])  # central directory damaged
    tar = bytearray(tar_bytes({"a.log": b"a\n", "b.log": b"b\n"}))
    tar[512 + 512 + 100: 512 + 512 + 160] = os.urandom(60)  # second header broken
    (tmp_path / "bad.tar").write_bytes(bytes(tar))
    inputs, notes = collect_inputs([tmp_path / "bad.zip", tmp_path / "cut.zip", tmp_path / "bad.tar"])
    found = by_name(inputs)
    assert found[str(tmp_path / "bad.zip")].kind == "binary"
    assert "unreadable zip" in found[str(tmp_path / "bad.zip")].note
    assert found[str(tmp_path / "cut.zip")].kind == "binary"
    assert read_all(found[f"{tmp_path / 'bad.tar'}!a.log"]) == (b"a\n", None)
    assert len(notes) >= 2


def test_scan_budget_stops_a_stream_bomb(tmp_path: Path) -> None:
    members = {"big.bin": b"\0" * (8 << 20), "after.log": b"late\n"}
    (tmp_path / "b.tar.gz").write_bytes(tar_bytes(members, "gzip"))
    (tmp_path / "next.log").write_text("still read\n")
    inputs, notes = collect_inputs([tmp_path / "b.tar.gz", tmp_path / "next.log"], Limits(max_scan_bytes=1 << 20))
    assert [f.name.rsplit("/", 1)[1] for f in inputs] == ["b.tar.gz!big.bin", "next.log"]
    assert any("stopped: decompressed more than 1 MiB" in n for n in notes)


def test_input_limit(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"{i}.log").write_text("x\n")
    inputs, notes = collect_inputs([tmp_path, tmp_path / "0.log"], Limits(max_inputs=3))
    assert len(inputs) == 3
    assert notes == ["input limit of 3 reached; remaining inputs not examined"]


# -- never raises --------------------------------------------------------------------------------

_MAGICS = [b"", b"\x1f\x8b\x08", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"\x04\x22\x4d\x18", b"BZh91AY&SY",
           b"PK\x03\x04", b"PK\x05\x06", b"\x7fELF\x02\x01\x01"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(magic=st.sampled_from(_MAGICS), body=st.binary(max_size=2048))
def test_random_content_never_raises(tmp_path: Path, magic: bytes, body: bytes) -> None:
    path = tmp_path / "fuzz"
    path.write_bytes(magic + body)
    inputs, notes = collect_inputs([path])
    assert inputs and all(isinstance(n, str) and "\n" not in n for n in notes)
    for f in inputs:
        assert f.kind in {"text", "elf", "elf-core", "binary", "empty", "unreadable"}
        stream = f.open()
        stream.read()
        stream.close()
