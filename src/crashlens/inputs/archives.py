"""Where an input's bytes come from, as a chain that can be opened again at any time:
a file, a decompressed stream, a tar member, a zip member. Plus the tar/zip helpers
shared by scanning and reopening. Nothing is ever extracted to disk."""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import zipfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import BinaryIO

from .codecs import DecodingReader
from .streams import (
    GuardedReader, InputStream, OpenContext, SliceReader, failed_stream, one_line, read_limited,
)

# A zip that has to be held in memory to reopen one of its members (a zip inside a
# compressed stream) may be this large unless the scanner passes its own limit.
REOPEN_BUFFER_LIMIT = 64 * 1024 * 1024
TAR_HEADER_LIMIT = 1024 * 1024


class Source(ABC):
    """How to get an input's bytes again. open_raw may raise; open() never does."""

    @property
    @abstractmethod
    def seekable(self) -> bool: ...

    @abstractmethod
    def open_raw(self, context: OpenContext) -> BinaryIO:
        """A stream of the content; everything it opens is registered in context."""

    @property
    def expected_size(self) -> int | None:
        """The content's size where the container states it."""
        return None

    def open(self) -> InputStream:
        context = OpenContext()
        try:
            inner = self.open_raw(context)
        except Exception as exc:
            context.close()
            return failed_stream(f"cannot open: {one_line(exc)}")
        return InputStream(GuardedReader(inner, context, expected_size=self.expected_size))


@dataclass(frozen=True)
class FileSource(Source):
    path: str

    @property
    def seekable(self) -> bool:
        return True

    def open_raw(self, context: OpenContext) -> BinaryIO:
        # never block: a FIFO or device put in the file's place since it was examined is refused
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError("no longer a regular file")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        stream = open(fd, "rb")
        context.closers.append(stream)
        return stream


@dataclass(frozen=True)
class BytesSource(Source):
    """Content read once into memory (a pipe given on the command line)."""

    data: bytes = field(repr=False)

    @property
    def seekable(self) -> bool:
        return True

    def open_raw(self, context: OpenContext) -> BinaryIO:
        return io.BytesIO(self.data)


@dataclass(frozen=True)
class CodecSource(Source):
    parent: Source
    codec: str
    limit: int | None = None  # content read at most (Limits.max_stream_bytes); None: all of it

    @property
    def seekable(self) -> bool:
        return False

    def open_raw(self, context: OpenContext) -> BinaryIO:
        reader = DecodingReader(self.parent.open_raw(context), self.codec, max_out=self.limit)
        context.closers.append(reader)
        context.checked.append(reader)
        return io.BufferedReader(reader, 64 * 1024)  # type: ignore[return-value]


@dataclass(frozen=True)
class TarMemberSource(Source):
    """Member number `index` of a tar. In a seekable tar it is a slice of the parent; in a
    stream (a .tar.gz) the archive is read again from the start up to the member."""

    parent: Source
    index: int
    member: str
    offset: int
    size: int
    sparse: bool = False
    header_limit: int = TAR_HEADER_LIMIT

    @property
    def seekable(self) -> bool:
        return self.parent.seekable and not self.sparse

    @property
    def expected_size(self) -> int | None:
        return self.size

    def open_raw(self, context: OpenContext) -> BinaryIO:
        stream = self.parent.open_raw(context)
        if self.seekable:
            reader = SliceReader(stream, self.offset, self.size)
            context.checked.append(reader)
            return reader  # type: ignore[return-value]
        archive = open_tar(stream, self.parent.seekable, self.header_limit)
        context.closers.append(archive)
        for index, info in enumerate(archive):
            if index == self.index:
                if info.name != self.member:
                    raise OSError(f"archive changed: member {self.index} is now {info.name!r}")
                extracted = archive.extractfile(info)
                if extracted is None:
                    raise OSError("member is no longer a regular file")
                return extracted  # type: ignore[return-value]
        raise OSError("archive changed: member not found")


@dataclass(frozen=True)
class ZipMemberSource(Source):
    parent: Source
    info: zipfile.ZipInfo = field(repr=False)
    buffer_limit: int = REOPEN_BUFFER_LIMIT  # a parent that is a stream is held in memory up to this

    @property
    def seekable(self) -> bool:
        return False

    def open_raw(self, context: OpenContext) -> BinaryIO:
        stream = self.parent.open_raw(context)
        if not self.parent.seekable:
            stream = io.BytesIO(read_limited(stream, self.buffer_limit))
        return open_zip_member(stream, self.info)


class SafeTarInfo(tarfile.TarInfo):
    """A TarInfo that refuses oversized pax / GNU long-name headers, which tarfile would
    otherwise read into memory whole. open_tar makes a subclass with the limit wanted."""

    header_limit = TAR_HEADER_LIMIT

    @classmethod
    def frombuf(cls, buf: bytes, encoding: str, errors: str) -> "SafeTarInfo":  # type: ignore[override]
        info = super().frombuf(buf, encoding, errors)
        if info.type in _META_TYPES and info.size > cls.header_limit:
            raise tarfile.ReadError(f"extended header of {info.size} bytes is larger than allowed")
        return info  # type: ignore[return-value]


_META_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
               tarfile.GNUTYPE_LONGLINK)


def open_tar(stream: BinaryIO, seekable: bool, header_limit: int = TAR_HEADER_LIMIT) -> tarfile.TarFile:
    """A tar reader over stream: random access when seekable, else a single forward pass."""
    info_class = SafeTarInfo
    if header_limit != SafeTarInfo.header_limit:
        info_class = type("SafeTarInfo", (SafeTarInfo,), {"header_limit": header_limit})
    return tarfile.open(fileobj=stream, mode="r:" if seekable else "r|", tarinfo=info_class)


def tar_entry_kind(info: tarfile.TarInfo) -> str:
    """"file", "dir", or what a skipped member is (symlink, hardlink, device, fifo...)."""
    if info.isreg():
        return "file"
    if info.isdir():
        return "dir"
    if info.issym():
        return f"symlink -> {info.linkname}"
    if info.islnk():
        return f"hardlink -> {info.linkname}"
    if info.ischr() or info.isblk():
        return "device"
    if info.isfifo():
        return "fifo"
    return f"member of tar type {info.type!r}"


_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")


def open_zip_member(stream: BinaryIO, info: zipfile.ZipInfo) -> BinaryIO:
    """A decompressing stream of one zip member, opened from its local header. Works from
    a ZipInfo alone, so reopening does not parse the central directory again."""
    if info.flag_bits & 0x1:
        raise OSError("encrypted")
    if info.header_offset < 0:
        raise zipfile.BadZipFile("bad local header offset")
    stream.seek(info.header_offset)
    header = stream.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
        raise zipfile.BadZipFile("truncated local header")
    fields = _LOCAL_HEADER.unpack(header)
    if fields[0] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local header magic")
    stream.seek(fields[10] + fields[11], io.SEEK_CUR)  # file name and extra field
    return zipfile.ZipExtFile(stream, "r", info, None, False)  # type: ignore[return-value]


def zip_entry_kind(info: zipfile.ZipInfo) -> str:
    """"file", "dir", or why a zip member is skipped."""
    if info.is_dir():
        return "dir"
    mode = info.external_attr >> 16
    kind = mode & 0o170000
    if kind == 0o120000:
        return "symlink"
    if kind and kind != 0o100000:
        return "special file"
    if info.flag_bits & 0x1:
        return "encrypted"
    return "file"


def zip_directory_size(stream: BinaryIO) -> tuple[int, int] | None:
    """(entries, bytes) of a zip's central directory from its end record, None if absent."""
    end = zipfile._EndRecData(stream)  # type: ignore[attr-defined]
    if not end:
        return None
    return int(end[zipfile._ECD_ENTRIES_TOTAL]), int(end[zipfile._ECD_SIZE])  # type: ignore[attr-defined]

