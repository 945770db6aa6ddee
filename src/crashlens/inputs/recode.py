"""Text inputs in UTF-16/UTF-32 (PowerShell and Windows tools write them) -> a UTF-8 stream.

Detection reports these encodings only from a byte-order mark, which the "utf-16"/"utf-32"
codecs consume; every later stage reads UTF-8 bytes.
"""

from __future__ import annotations

import codecs
import io
from typing import Any, BinaryIO

CHUNK = 1 << 20  # bytes read from the source stream at a time


class Utf8Recoder(io.RawIOBase):
    """A binary stream of UTF-8, decoded incrementally from a stream in another encoding.
    Undecodable bytes become U+FFFD; the source stream's `error` (an InputStream's reason for
    ending early) is passed on."""

    def __init__(self, raw: Any, encoding: str) -> None:
        self.raw = raw
        self.decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self.pending = b""
        self.error = None

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self.pending:
            chunk = self.raw.read(CHUNK)
            self.pending = self.decoder.decode(chunk or b"", final=not chunk).encode("utf-8")
            if not chunk:
                self.error = getattr(self.raw, "error", None)
                break
        n = min(len(b), len(self.pending))
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def utf8_stream(stream: BinaryIO, encoding: str) -> BinaryIO:
    """stream as UTF-8 bytes: as is, unless encoding (the detector's) is UTF-16 or UTF-32."""
    if encoding.startswith(("utf-16", "utf-32")):
        return io.BufferedReader(Utf8Recoder(stream, encoding[:6]), CHUNK)  # type: ignore[return-value]
    return stream
