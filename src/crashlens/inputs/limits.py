"""Limits that keep hostile input (bombs, deep nesting, huge directories) cheap to examine."""

from __future__ import annotations

from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class Limits:
    """Bounds on what collect_inputs examines. Every limit that is hit leaves a note."""

    max_members: int = 10_000  # entries read from one archive (the rest are noted, not read)
    max_depth: int = 4  # archives opened inside archives (0: open no archive at all)
    max_codec_layers: int = 4  # compression inside compression (x.gz.gz...) at one level
    max_member_bytes: int = 64 * MiB  # a member that must be held in memory (a zip in a stream)
    max_ratio: float = 200.0  # expanded/compressed size above which a nested archive is not opened
    max_scan_bytes: int = 4 * GiB  # bytes decompressed while examining one given path
    max_archive_bytes: int = 2 * GiB  # archive members (their stated sizes) taken from one given path
    # content of a compressed input read when it is analysed (the rest is noted, not read): what
    # can be decompressed in ~10-20 s (bz2 decodes 5-10x slower than the others)
    max_stream_bytes: int = 1 * GiB
    max_bz2_stream_bytes: int = 256 * MiB
    max_core_stream_bytes: int = 2 * GiB  # a compressed core, spilled to a temporary file (sparse)
    max_inputs: int = 100_000  # InputFiles returned by one call
    max_zip_directory_bytes: int = 32 * MiB  # a zip central directory larger than this is refused
    max_header_bytes: int = 1 * MiB  # a tar pax/long-name header larger than this ends the archive
    max_notes_per_archive: int = 20  # skip notes for one archive before they are summarised
    prefix_bytes: int = 64 * KiB  # bytes read to decide what a file is


DEFAULT_LIMITS = Limits()


class ScanLimitReached(Exception):
    """Raised (internally) when examining one given path decompressed more than allowed."""


class ScanBudget:
    """Counts bytes decompressed while examining one given path; never used by InputFile.open()."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def charge(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise ScanLimitReached(f"decompressed more than {human_bytes(self.limit)} while examining it")


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"
