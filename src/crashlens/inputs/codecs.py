"""Streaming decompression: gzip, xz, bz2, zstd frames and lz4 frames.

DecodingReader never raises for bad data: a decoder error or a stream that ends early turns
into end-of-file, and the reason is left in its `error` attribute (None when the stream was
complete). Output is produced in bounded pieces, so a bomb never lands in memory at once.
"""

from __future__ import annotations

import bz2
import io
import lzma
import struct
import zlib
from typing import Any, BinaryIO, Protocol

import lz4.frame
import zstandard

from .limits import ScanBudget, ScanLimitReached, human_bytes

CODECS = ("gzip", "xz", "bz2", "zstd", "lz4")
READ_SIZE = 64 * 1024
_XZ_MEMLIMIT = 256 * 1024 * 1024
_ZSTD_MAX_WINDOW = 1 << 27  # 128 MiB, zstd's own default ceiling
_ZSTD_SLICE = 1024  # input fed to zstd per call: bounds the output of one call to ~32 MiB


class Decoder(Protocol):
    """The lzma/bz2 decompressor interface: bounded output, internal input buffering."""

    @property
    def eof(self) -> bool: ...

    @property
    def needs_input(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


class _GzipDecoder:
    """One gzip member with the lzma-style interface: the header and trailer are parsed
    here and the body is raw deflate, so a bad CRC is found only after every byte of the
    body was handed out (zlib's own gzip mode drops the output of the call that fails)."""

    def __init__(self) -> None:
        self._buffer = b""  # header or trailer bytes not yet complete
        self._inflater: Any = None  # raw inflater once the header is read
        self._crc = 0
        self._size = 0
        self._eof = False
        self._unused = b""

    @property
    def eof(self) -> bool:
        return self._eof

    @property
    def needs_input(self) -> bool:
        if self._inflater is None:
            return True
        if not self._inflater.eof:
            return not self._inflater.unconsumed_tail
        return len(self._buffer) < 8

    @property
    def unused_data(self) -> bytes:
        return self._unused

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if self._inflater is None:
            self._buffer += data
            start = _gzip_header_length(self._buffer)
            if start is None:
                return b""
            data, self._buffer = self._buffer[start:], b""
            self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        inflater = self._inflater
        if not inflater.eof:
            tail = inflater.unconsumed_tail
            out = inflater.decompress(tail + data if tail else data, max(max_length, 0))
            self._crc = zlib.crc32(out, self._crc)
            self._size += len(out)
            if inflater.eof:
                self._buffer = inflater.unused_data
            if out or not inflater.eof:
                return out  # the trailer, if complete, is checked by the next call
        else:
            self._buffer += data
        if len(self._buffer) < 8:
            return b""
        crc, size = struct.unpack("<II", self._buffer[:8])
        self._unused, self._buffer, self._eof = self._buffer[8:], b"", True
        if crc != self._crc:
            raise ValueError("CRC check failed")
        if size != self._size & 0xFFFFFFFF:
            raise ValueError("length check failed")
        return b""


_GZIP_HEADER_LIMIT = 1024 * 1024


def _gzip_header_length(data: bytes) -> int | None:
    """Length of the gzip member header at the start of data; None if data is too short."""
    if not b"\x1f\x8b\x08".startswith(data[:3]):
        raise ValueError("not a gzip member header (trailing garbage?)")
    if len(data) < 10:
        return None
    flags, pos = data[3], 10
    if flags & 0x04:  # FEXTRA
        if len(data) < pos + 2:
            return None
        pos += 2 + int.from_bytes(data[pos:pos + 2], "little")
    for flag in (0x08, 0x10):  # FNAME, FCOMMENT: zero-terminated
        if flags & flag:
            end = data.find(b"\0", pos)
            if end < 0:
                if len(data) > _GZIP_HEADER_LIMIT:
                    raise ValueError("gzip header too long")
                return None
            pos = end + 1
    if flags & 0x02:  # FHCRC
        pos += 2
    return pos if len(data) >= pos else None


class _ZstdDecoder:
    """One zstd frame. zstandard's decompressobj has no output bound, so input is fed in
    small slices and output beyond max_length is held back."""

    def __init__(self) -> None:
        dctx = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
        self._z = dctx.decompressobj()
        self._input = b""
        self._pos = 0
        self._output = b""
        self._failed: Exception | None = None

    @property
    def eof(self) -> bool:
        return bool(self._z.eof) and not self._output

    @property
    def needs_input(self) -> bool:
        return not self._output and self._pos >= len(self._input) and not self._z.eof and self._failed is None

    @property
    def unused_data(self) -> bytes:
        return self._z.unused_data + self._input[self._pos:] if self._z.eof else b""

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if self._failed is not None and not self._output:
            raise self._failed
        if data:
            self._input = self._input[self._pos:] + data
            self._pos = 0
        limit = max_length if max_length > 0 else 1 << 62
        pieces = [self._output]
        have = len(self._output)
        while have < limit and not self._z.eof and self._pos < len(self._input) and self._failed is None:
            piece = self._input[self._pos:self._pos + _ZSTD_SLICE]
            self._pos += len(piece)
            try:
                out = self._z.decompress(piece)
            except zstandard.ZstdError as exc:  # keep what came before; raise on the next call
                self._failed = exc
                break
            pieces.append(out)
            have += len(out)
        joined = b"".join(pieces)
        self._output = joined[limit:]
        return joined[:limit]


def new_decoder(codec: str) -> Decoder:
    if codec == "gzip":
        return _GzipDecoder()
    if codec == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=_XZ_MEMLIMIT)
    if codec == "bz2":
        return bz2.BZ2Decompressor()
    if codec == "zstd":
        return _ZstdDecoder()
    if codec == "lz4":
        return lz4.frame.LZ4FrameDecompressor()
    raise ValueError(f"unknown codec {codec!r}")


class DecodingReader(io.RawIOBase):
    """A readable raw stream of the decompressed content of `source`.

    Concatenated streams (gzip members, xz streams, zstd/lz4 frames) are read in turn;
    zero padding after the last one is ignored. Decoder errors, a stream cut short and
    (during scanning) an exhausted budget end the stream; `error` then says why.
    """

    def __init__(self, source: BinaryIO, codec: str, budget: ScanBudget | None = None,
                 max_out: int | None = None) -> None:
        super().__init__()
        self.codec = codec
        self.max_out = max_out  # content beyond this many bytes ends the stream, with `error` set
        self.error: str | None = None
        self.bytes_out = 0
        self._source = source
        self._budget = budget
        self._decoder = new_decoder(codec)
        self._done = False

    @property
    def truncated(self) -> bool:
        return self.error is not None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._done or len(buffer) == 0:
            return 0
        want = len(buffer)
        if self.max_out is not None:
            want = min(want, self.max_out - self.bytes_out)
            if want <= 0:
                self._done = True
                try:
                    more = bool(self._decode(1))  # more content than allowed, or just the end?
                except Exception:
                    more = True
                if more:
                    self.error = self.error or (f"{self.codec} content beyond {human_bytes(self.max_out)} not read "
                                                "(the limit for a compressed input)")
                return 0
        try:
            data = self._decode(want)
        except ScanLimitReached:
            raise
        except _SourceError as exc:
            data = b""
            self.error = self.error or f"{self.codec} stream unreadable after {self.bytes_out} bytes: {exc}"
        except Exception as exc:  # zlib.error, LZMAError, ZstdError, lz4's RuntimeError, tar errors...
            data = b""
            self.error = self.error or f"{self.codec} stream corrupt after {self.bytes_out} bytes: {_one_line(exc)}"
        if not data:
            self._done = True
            return 0
        n = len(data)
        buffer[:n] = data
        self.bytes_out += n
        if self._budget is not None:
            self._budget.charge(n)  # ScanLimitReached goes to the scanner, not into `error`
        return n

    def _decode(self, size: int) -> bytes:
        while True:
            decoder = self._decoder
            if decoder.eof:
                rest = (decoder.unused_data or b"").lstrip(b"\0")  # zero padding after a stream is allowed
                while not rest:
                    chunk = self._read_source()
                    if not chunk:
                        return b""  # clean end
                    rest = chunk.lstrip(b"\0")
                self._decoder = new_decoder(self.codec)
                data = self._decoder.decompress(rest, size)
            elif decoder.needs_input:
                chunk = self._read_source()
                data = decoder.decompress(chunk, size)
                if not chunk and not data and not decoder.eof:
                    self.error = f"{self.codec} stream truncated after {self.bytes_out} bytes"
                    return b""
            else:
                data = decoder.decompress(b"", size)
            if data:
                return data

    def _read_source(self) -> bytes:
        try:
            return self._source.read(READ_SIZE) or b""
        except ScanLimitReached:
            raise
        except Exception as exc:  # the compressed data itself could not be read
            raise _SourceError(_one_line(exc)) from exc

    def close(self) -> None:
        if not self.closed:
            try:
                self._source.close()
            finally:
                super().close()


class _SourceError(Exception):
    pass


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
