"""Small stream wrappers: a prefix put back in front, a slice of a seekable file, a metered
reader, and the guarded stream that InputFile.open() returns."""

from __future__ import annotations

import io
from typing import Any, BinaryIO, Protocol

from .limits import ScanBudget, human_bytes

CHUNK = 64 * 1024


class Checked(Protocol):
    """Anything that records why it ended early (DecodingReader, SliceReader)."""

    error: str | None


class OpenContext:
    """What opening one source created: streams to close, and readers whose `error` to report."""

    def __init__(self) -> None:
        self.closers: list[Any] = []
        self.checked: list[Checked] = []

    def close(self) -> None:
        for obj in reversed(self.closers):
            try:
                obj.close()
            except Exception:
                pass
        self.closers.clear()

    def first_error(self) -> str | None:
        for reader in self.checked:
            if reader.error:
                return reader.error
        return None


class PrefixedReader(io.RawIOBase):
    """`prefix` followed by the rest of `stream` (used after sniffing a non-seekable stream)."""

    def __init__(self, prefix: bytes, stream: BinaryIO) -> None:
        super().__init__()
        self._prefix = prefix
        self._pos = 0
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._pos < len(self._prefix):
            piece = self._prefix[self._pos:self._pos + len(buffer)]
            self._pos += len(piece)
        else:
            piece = self._stream.read(len(buffer)) or b""
        buffer[:len(piece)] = piece
        return len(piece)


class SliceReader(io.RawIOBase):
    """Bytes [offset, offset+size) of a seekable file, itself seekable. A file shorter than
    the slice ends the stream early and sets `error`."""

    def __init__(self, fileobj: BinaryIO, offset: int, size: int) -> None:
        super().__init__()
        self.error: str | None = None
        self._file = fileobj
        self._offset = offset
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self._size - self._pos)
        if want <= 0:
            return 0
        self._file.seek(self._offset + self._pos)
        data = self._file.read(want)
        if not data:
            self.error = f"data truncated: {self._pos} of {self._size} bytes present"
            return 0
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)


class MeteredReader(io.RawIOBase):
    """Charges every byte read from `stream` to a scan budget."""

    def __init__(self, stream: BinaryIO, budget: ScanBudget) -> None:
        super().__init__()
        self._stream = stream
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer)) or b""
        buffer[:len(data)] = data
        self._budget.charge(len(data))
        return len(data)


class GuardedReader(io.RawIOBase):
    """Never raises on read: any failure ends the stream and is kept in `error`, as is the
    first error of a decoder or slice underneath (a truncated gzip, a short tar member)."""

    def __init__(self, inner: BinaryIO | None, context: OpenContext, error: str | None = None,
                 expected_size: int | None = None) -> None:
        super().__init__()
        self._inner = inner
        self._context = context
        self._error = error
        self._done = inner is None
        self._expected = expected_size
        self._delivered = 0

    @property
    def error(self) -> str | None:
        if self._error:
            return self._error
        if self._done and self._expected is not None and self._delivered == self._expected:
            return None  # complete: damage further on in the archive is not this member's
        return self._context.first_error()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._done or self._inner is None:
            return 0
        try:
            data = self._inner.read(len(buffer)) or b""
        except Exception as exc:
            self._error = one_line(exc)
            data = b""
        if not data:
            self._done = True
            return 0
        buffer[:len(data)] = data
        self._delivered += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._context.close()
            super().close()


class InputStream(io.BufferedReader):
    """What InputFile.open() returns: a buffered binary stream that never raises on read.

    After reading, `error` is None when the whole content was read, else a one-line reason
    (e.g. "gzip stream truncated after 1048576 bytes"); `truncated` is bool(error).
    """

    raw: GuardedReader

    def __init__(self, raw: GuardedReader) -> None:
        super().__init__(raw, CHUNK)

    @property
    def error(self) -> str | None:
        return self.raw.error

    @property
    def truncated(self) -> bool:
        return self.raw.error is not None


def failed_stream(reason: str) -> InputStream:
    """An empty stream whose `error` is reason (what open() returns for an unreadable input)."""
    return InputStream(GuardedReader(None, OpenContext(), reason))


def read_prefix(stream: BinaryIO, size: int) -> bytes:
    """Up to size bytes from the start of stream (fewer only at end of data)."""
    pieces: list[bytes] = []
    have = 0
    while have < size:
        data = stream.read(size - have)
        if not data:
            break
        pieces.append(data)
        have += len(data)
    return b"".join(pieces)


class TooLarge(Exception):
    pass


def read_limited(stream: BinaryIO, limit: int) -> bytes:
    """All of stream, or TooLarge if it holds more than limit bytes."""
    data = read_prefix(stream, limit + 1)
    if len(data) > limit:
        raise TooLarge(f"more than {human_bytes(limit)}")
    return data


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

