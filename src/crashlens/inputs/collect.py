"""collect_inputs: walk the given paths, open compressed files and archives, and detect
what every input is from its content."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import os
import re
import stat
import zipfile
from typing import Any, BinaryIO, Sequence

from ..model import InputFile
from .archives import (
    BytesSource, CodecSource, FileSource, Source, TarMemberSource, ZipMemberSource, open_tar,
    open_zip_member, tar_entry_kind, zip_directory_size, zip_entry_kind,
)
from .codecs import DecodingReader
from .detect import classify, detect_codec, detect_container
from .notes import summarise_notes
from .limits import DEFAULT_LIMITS, Limits, ScanBudget, ScanLimitReached, human_bytes
from .roles import text_role
from .streams import (
    Checked, MeteredReader, OpenContext, PrefixedReader, SliceReader, TooLarge, failed_stream, one_line,
    read_limited, read_prefix,
)

_ArchiveKey = tuple[str, Any, bytes]
_MAX_DIR_DEPTH = 256
# Never read through a folder walk: kernel pseudo-files (the process's own environment) and devices.
_PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
_PIPE_WAIT = 10  # seconds a FIFO given by name may take to bring its first bytes
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


class _InputLimitReached(Exception):
    pass


def collect_inputs(
    paths: Sequence[str | os.PathLike[str]], limits: Limits = DEFAULT_LIMITS
) -> tuple[list[InputFile], list[str]]:
    """The inputs found under paths, in the order given (directories in sorted order), and
    one-line notes about everything skipped, refused, truncated or unreadable.

    Never raises for bad input: a path that cannot be read becomes an InputFile of kind
    "unreadable" (reason in its note) plus a note.
    """
    if isinstance(paths, (str, bytes, os.PathLike)):  # one path given bare
        paths = [paths]  # type: ignore[list-item]
    scanner = _Scanner(limits)
    for path in paths:
        try:
            scanner.add_path(path)
        except _InputLimitReached:
            scanner.notes.append(f"input limit of {limits.max_inputs} reached; remaining inputs not examined")
            break
    return scanner.inputs, summarise_notes(scanner.notes)


class _SkipNotes:
    """Notes for skipped archive members, summarised after the first few."""

    def __init__(self, notes: list[str], archive: str, limit: int) -> None:
        self._notes = notes
        self._archive = archive
        self._limit = limit
        self._count = 0

    def add(self, member: str, why: str) -> None:
        if self._count < self._limit:
            self._notes.append(f"{member}: skipped, {why}")
        self._count += 1

    def flush(self) -> None:
        if self._count > self._limit:
            self._notes.append(f"{self._archive}: {self._count - self._limit} more members skipped")


class _Scanner:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.inputs: list[InputFile] = []
        self.notes: list[str] = []
        self.budget = ScanBudget(limits.max_scan_bytes)
        self._root = "/"  # the folder being walked (its real path)
        self.content_used = 0  # archive member bytes accepted for the path being examined

    # -- given paths, directories, files ---------------------------------------------------

    def add_path(self, path: str | os.PathLike[str]) -> None:
        real = os.fsdecode(path)
        display = _display(real)
        self.budget = ScanBudget(self.limits.max_scan_bytes)
        self.content_used = 0
        found = len(self.inputs)
        try:
            try:
                st = os.stat(real)
            except (OSError, ValueError) as exc:
                self._unreadable(display, _reason(exc))
                return
            if stat.S_ISDIR(st.st_mode):
                self._root = os.path.realpath(real)
                self._walk(real, display, frozenset({(st.st_dev, st.st_ino)}))
            elif stat.S_ISREG(st.st_mode):
                self._file(real, display)
            elif stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
                self._pipe(real, display)
            else:
                self._unreadable(display, "not a regular file")
        except ScanLimitReached as exc:
            self.notes.append(f"{display}: stopped: {exc}; {len(self.inputs) - found} inputs found before")
        except _InputLimitReached:
            raise
        except Exception as exc:  # a bug must not lose the other inputs
            self.notes.append(f"{display}: stopped by an internal error: {one_line(exc)}")

    def _walk(self, path: str, shown: str, ancestors: frozenset[tuple[int, int]]) -> None:
        """Regular files under path in sorted order; symlinks to directories are not followed,
        nor symlinks that leave the folder given (an artifact's `env.log -> /proc/self/environ`
        or `-> /etc/passwd`); nothing under /proc, /sys or /dev is read."""
        if len(ancestors) > _MAX_DIR_DEPTH:
            self.notes.append(f"{shown}: skipped, directories nested deeper than {_MAX_DIR_DEPTH}")
            return
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self.notes.append(f"{shown}: cannot list directory: {_reason(exc)}")
            return
        for entry in entries:
            child_shown = os.path.join(shown, _display(entry.name))
            try:
                if entry.is_symlink():
                    try:
                        target = os.stat(entry.path)
                    except OSError:
                        self.notes.append(f"{child_shown}: skipped, broken symlink")
                        continue
                    resolved = os.path.realpath(entry.path)
                    if not _inside(resolved, self._root) or _inside_any(resolved, _PSEUDO_ROOTS):
                        self.notes.append(f"{child_shown}: skipped, symlink that leaves the folder")
                    elif stat.S_ISDIR(target.st_mode):
                        self.notes.append(f"{child_shown}: skipped, symlink to a directory")
                    elif stat.S_ISREG(target.st_mode):
                        self._file(entry.path, child_shown)
                    else:
                        self.notes.append(f"{child_shown}: skipped, not a regular file")
                elif entry.is_dir(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    key = (st.st_dev, st.st_ino)
                    if key in ancestors:
                        self.notes.append(f"{child_shown}: skipped, directory loop")
                    else:
                        self._walk(entry.path, child_shown, ancestors | {key})
                elif entry.is_file(follow_symlinks=False):
                    if _inside_any(self._root, _PSEUDO_ROOTS):
                        self.notes.append(f"{child_shown}: skipped, a kernel pseudo-file")
                        continue
                    self._file(entry.path, child_shown)
                else:
                    self.notes.append(f"{child_shown}: skipped, not a regular file")
            except OSError as exc:
                self.notes.append(f"{child_shown}: skipped, {_reason(exc)}")

    def _file(self, path: str, display: str) -> None:
        try:
            stream = _open_regular(path)
        except OSError as exc:
            self._unreadable(display, _reason(exc))
            return
        if stream is None:  # replaced by a FIFO or device since it was listed
            self._unreadable(display, "not a regular file")
            return
        with stream:
            try:
                size: int | None = os.fstat(stream.fileno()).st_size
            except OSError:
                size = None
            self._visit(display, FileSource(os.path.abspath(path)), stream, size, 0, (), (), ())

    def _pipe(self, path: str, display: str) -> None:
        """A pipe or character device given by name (/dev/stdin): read once into memory."""
        limit = self.limits.max_member_bytes
        try:
            # O_NONBLOCK: opening a FIFO that has no writer does not wait for one; reads then
            # block as usual (a FIFO without a writer reads as empty, a pipe to its end)
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            with open(fd, "rb") as stream:
                if stat.S_ISFIFO(os.fstat(fd).st_mode) and not _wait_readable(fd, _PIPE_WAIT):
                    self._emit(display, "empty", 0, BytesSource(b""), f"nothing written to it within {_PIPE_WAIT} s "
                               "(no writer?); not read", {}, loud=True)
                    return
                os.set_blocking(fd, True)
                data = read_prefix(stream, limit + 1)
        except OSError as exc:
            self._unreadable(display, _reason(exc))
            return
        if len(data) > limit:
            data = data[:limit]
            self.notes.append(f"{display}: not a regular file; only the first {human_bytes(limit)} read")
        self._visit(display, BytesSource(data), io.BytesIO(data), len(data), 0, (), (), ())

    # -- one input: codecs, archives, leaves -------------------------------------------------

    def _visit(
        self,
        name: str,
        source: Source,
        live: BinaryIO,
        size: int | None,
        depth: int,
        codecs: tuple[str, ...],
        ancestors: tuple[_ArchiveKey, ...],
        checked: tuple[Checked, ...],
        packed: int | None = None,
    ) -> None:
        """Detect what `live` (the content of `source`, read now) is and record it.

        depth: archives we are inside; codecs: compression layers undone at this level;
        checked: readers under `live` whose `error` tells of truncation; packed: the
        compressed size of a zip member, for the ratio limit."""
        if len(self.inputs) >= self.limits.max_inputs:
            raise _InputLimitReached
        prefix, read_error = self._sniff(live)
        stream_error = next((c.error for c in checked if c.error), None)
        if size is not None and len(prefix) == size:
            stream_error = None  # all of it was read: the damage (seen in read-ahead) lies beyond it
        error = stream_error or read_error
        if not prefix and read_error:
            self._emit(name, "unreadable", size, source, f"cannot read: {read_error}", {}, loud=True)
            return

        codec = detect_codec(prefix)
        if codec is not None and len(codecs) < self.limits.max_codec_layers:
            reader = DecodingReader(PrefixedReader(prefix, live), codec, self.budget)
            limit = self.limits.max_bz2_stream_bytes if codec == "bz2" else self.limits.max_stream_bytes
            self._visit(name, CodecSource(source, codec, limit), reader, None, depth, codecs + (codec,), ancestors,
                        checked + (reader,))
            return
        facts: dict[str, Any] = {"codecs": list(codecs)} if codecs else {}
        if codec is not None:
            note = f"compressed more than {self.limits.max_codec_layers} times over; not decompressed"
            self._emit(name, "binary", size, source, note, facts | {"codec": codec}, loud=True)
            return

        container = detect_container(prefix)
        if container is not None:
            self._archive(name, container, source, live, prefix, size, depth, codecs, ancestors, checked, packed)
            return

        kind, found = classify(prefix)
        facts.update(found)
        role = text_role(name, prefix[:4096]) if kind == "text" else ("", "")
        if kind == "elf-core" and isinstance(source, CodecSource):
            source = dataclasses.replace(source, limit=self.limits.max_core_stream_bytes)
        note = ""
        if error:
            facts["truncated"] = True
            note = f"{error}; partial content kept" if prefix else f"{error}; nothing could be read"
        self._emit(name, kind, size, source, note, facts, loud=bool(note), role=role)

    def _sniff(self, live: BinaryIO) -> tuple[bytes, str | None]:
        """The detection prefix, and why reading stopped early (None: it did not)."""
        pieces: list[bytes] = []
        have = 0
        try:
            while have < self.limits.prefix_bytes:
                data = live.read(self.limits.prefix_bytes - have)
                if not data:
                    break
                pieces.append(data)
                have += len(data)
        except (ScanLimitReached, _InputLimitReached):
            raise
        except Exception as exc:
            return b"".join(pieces), one_line(exc)
        return b"".join(pieces), None

    def _archive(
        self,
        name: str,
        container: str,
        source: Source,
        live: BinaryIO,
        prefix: bytes,
        size: int | None,
        depth: int,
        codecs: tuple[str, ...],
        ancestors: tuple[_ArchiveKey, ...],
        checked: tuple[Checked, ...],
        packed: int | None,
    ) -> None:
        key: _ArchiveKey = (container, size, hashlib.sha256(prefix).digest())
        limits = self.limits
        refusal = ""
        if depth >= limits.max_depth:
            refusal = f"archive nested deeper than {limits.max_depth} levels; not opened"
        elif key in ancestors:
            refusal = "archive contains itself; not opened again"
        elif depth > 0 and packed and size and size > limits.max_ratio * packed:
            refusal = f"compression ratio {size / packed:.0f} exceeds limit {limits.max_ratio:g}; not opened"
        if refusal:
            facts: dict[str, Any] = {"container": container}
            if codecs:
                facts["codecs"] = list(codecs)
            self._emit(name, "binary", size, source, refusal, facts, loud=True)
            return
        if container == "zip":
            self._zip(name, source, live, prefix, size, depth, ancestors + (key,))
        else:
            self._tar(name, source, live, prefix, depth, ancestors + (key,), checked)

    def _zip(self, name: str, source: Source, live: BinaryIO, prefix: bytes, size: int | None, depth: int,
             ancestors: tuple[_ArchiveKey, ...]) -> None:
        limits = self.limits
        context = OpenContext()
        try:
            try:
                if source.seekable:
                    stream = source.open_raw(context)
                else:  # zip needs random access: hold a zip inside a stream in memory
                    stream = io.BytesIO(read_limited(PrefixedReader(prefix, live), limits.max_member_bytes))
                directory = zip_directory_size(stream)
                if directory is not None and directory[1] > limits.max_zip_directory_bytes:
                    raise TooLarge(f"central directory of {directory[1]} bytes ({directory[0]} entries) exceeds "
                                   f"limit {human_bytes(limits.max_zip_directory_bytes)}")
                archive = zipfile.ZipFile(stream)  # type: ignore[arg-type]
                infos = archive.infolist()
            except (ScanLimitReached, _InputLimitReached):
                raise
            except TooLarge as exc:
                self._emit(name, "binary", size, source, f"zip not opened: {exc}", {"container": "zip"}, loud=True)
                return
            except Exception as exc:
                self._emit(name, "binary", size, source, f"unreadable zip: {one_line(exc)}", {"container": "zip"},
                           loud=True)
                return
            if len(infos) > limits.max_members:
                self.notes.append(f"{name}: member count {len(infos)} exceeds limit {limits.max_members}; "
                                  f"first {limits.max_members} read")
                infos = infos[:limits.max_members]
            skipped = _SkipNotes(self.notes, name, limits.max_notes_per_archive)
            overlapping = _overlapping(infos)
            for info in infos:
                what = zip_entry_kind(info)
                if what == "dir":
                    continue
                member = f"{name}!{_display(info.filename)}"
                if id(info) in overlapping:
                    what = "its data overlaps another member's (a zip bomb's overlapping entries)"
                elif what == "file":
                    what = self._content_refusal(info.file_size)
                if what != "file":
                    skipped.add(member, what)
                    continue
                member_source = ZipMemberSource(source, info, limits.max_member_bytes)
                try:
                    member_stream = open_zip_member(stream, info)
                except Exception as exc:
                    self._emit(member, "unreadable", info.file_size, member_source, f"cannot open: {one_line(exc)}",
                               {}, loud=True)
                    continue
                self._visit(member, member_source, MeteredReader(member_stream, self.budget), info.file_size,
                            depth + 1, (), ancestors, (), packed=info.compress_size)
            skipped.flush()
        finally:
            context.close()

    def _tar(self, name: str, source: Source, live: BinaryIO, prefix: bytes, depth: int,
             ancestors: tuple[_ArchiveKey, ...], checked: tuple[Checked, ...]) -> None:
        limits = self.limits
        context = OpenContext()
        skipped = _SkipNotes(self.notes, name, limits.max_notes_per_archive)
        members = 0
        failure: str | None = None
        try:
            if source.seekable:  # random access: members become slices of the file
                stream: BinaryIO = source.open_raw(context)
            else:
                stream = PrefixedReader(prefix, live)  # type: ignore[assignment]
            archive = open_tar(stream, source.seekable, limits.max_header_bytes)
            for index, info in enumerate(archive):
                if index >= limits.max_members:
                    self.notes.append(f"{name}: more than {limits.max_members} members; "
                                      f"first {limits.max_members} read")
                    break
                what = tar_entry_kind(info)
                if what == "dir":
                    continue
                member = f"{name}!{_display(_strip_dot(info.name))}"
                if what == "file":
                    what = self._content_refusal(info.size)
                if what != "file":
                    skipped.add(member, what)
                    continue
                member_source = TarMemberSource(source, index, info.name, info.offset_data, info.size,
                                                info.issparse(), limits.max_header_bytes)
                member_stream: BinaryIO | None
                member_checked = checked
                if member_source.seekable:
                    slice_reader = SliceReader(stream, info.offset_data, info.size)
                    member_stream, member_checked = slice_reader, (slice_reader,)  # type: ignore[assignment]
                else:
                    member_stream = archive.extractfile(info)  # type: ignore[assignment]
                if member_stream is None:
                    continue
                members += 1
                self._visit(member, member_source, member_stream, info.size, depth + 1, (), ancestors, member_checked)
        except (ScanLimitReached, _InputLimitReached):
            raise
        except Exception as exc:
            failure = one_line(exc)
        finally:
            context.close()
        skipped.flush()
        stream_error = next((c.error for c in checked if c.error), None)
        reason = stream_error or failure
        if reason:
            self.notes.append(f"{name}: {reason}; {members} members read before it")
        elif members == 0 and failure is None:
            self.notes.append(f"{name}: archive has no regular files")

    def _content_refusal(self, size: int) -> str:
        """"file" if an archive member of `size` bytes fits the content budget of the path
        being examined (what an analysis will decompress), else why it is skipped."""
        if self.content_used + size > self.limits.max_archive_bytes:
            return f"archive content beyond {human_bytes(self.limits.max_archive_bytes)}"
        self.content_used += size
        return "file"

    # -- results --------------------------------------------------------------------------

    def _emit(self, name: str, kind: str, size: int | None, source: Source, note: str, facts: dict[str, Any],
              loud: bool = False, role: tuple[str, str] = ("", "")) -> None:
        """role: for a text input, what it is (inputs.roles: log, notebook, source, …) and why."""
        if len(self.inputs) >= self.limits.max_inputs:
            raise _InputLimitReached
        self.inputs.append(InputFile(name=name, kind=kind, size=size, open=source.open, note=note, facts=facts,
                                     role=role[0], role_reason=role[1]))
        if loud and note:
            self.notes.append(f"{name}: {note}")

    def _unreadable(self, display: str, reason: str) -> None:
        if len(self.inputs) >= self.limits.max_inputs:
            raise _InputLimitReached
        opener = functools.partial(failed_stream, reason)
        self.inputs.append(InputFile(name=display, kind="unreadable", size=None, open=opener, note=reason))
        self.notes.append(f"{display}: unreadable: {reason}")


def _display(name: str) -> str:
    """A one-line, printable form of a path or member name (control characters escaped,
    undecodable bytes shown as \\xNN)."""
    if any("\udc80" <= ch <= "\udcff" for ch in name):
        name = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", name)


def _overlapping(infos: Sequence[zipfile.ZipInfo]) -> set[int]:
    """ids of the zip entries whose local header or data lies inside an earlier entry's (the
    overlapping entries of a non-recursive zip bomb: thousands of names, one member's data)."""
    out: set[int] = set()
    end = -1
    for info in sorted(infos, key=lambda i: i.header_offset):
        if info.is_dir() and not info.compress_size:
            continue
        if info.header_offset < end:
            out.add(id(info))
            continue
        end = info.header_offset + 30 + info.compress_size  # less its name: never a false alarm
    return out


def _wait_readable(fd: int, seconds: float) -> bool:
    """Whether a FIFO has data (or its writer came and went) within `seconds`."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(seconds * 1000))


def _open_regular(path: str) -> BinaryIO | None:
    """`path` opened for reading if it is a regular file (None if it is not), without
    blocking on a FIFO or device swapped in after it was listed."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return open(fd, "rb")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _inside_any(path: str, roots: Sequence[str]) -> bool:
    return any(_inside(path, r) for r in roots)


def _strip_dot(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name or "."


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return one_line(exc)
