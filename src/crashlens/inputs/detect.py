"""Content detection from a small prefix: compression, archives, ELF, text or binary.

Nothing here looks at file names and nothing reads more than the prefix it is given.
"""

from __future__ import annotations

import codecs
import re
import struct
import tarfile
from typing import Any

# Compression formats: magic bytes at offset 0.
_CODEC_MAGIC: tuple[tuple[str, bytes], ...] = (
    ("gzip", b"\x1f\x8b\x08"),
    ("xz", b"\xfd7zXZ\x00"),
    ("zstd", b"\x28\xb5\x2f\xfd"),
    ("lz4", b"\x04\x22\x4d\x18"),
)
_BZ2_BLOCK = (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")  # block / end-of-stream

ELF_TYPES = {0: "none", 1: "rel", 2: "exec", 3: "dyn", 4: "core"}
ELF_MACHINES = {
    2: "sparc", 3: "x86", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390", 40: "arm",
    43: "sparcv9", 62: "x86_64", 183: "aarch64", 190: "cuda", 224: "amdgpu", 243: "riscv",
    258: "loongarch",
}
ET_CORE = 4

# Control bytes that do not occur in text (tab, LF, VT, FF, CR, BEL, BS, ESC are allowed).
_CONTROL = bytes(c for c in range(32) if c not in (7, 8, 9, 10, 11, 12, 13, 27)) + b"\x7f"
_HIGH = bytes(range(0x80, 0x100))
_NUL_RUN = re.compile(rb"\x00{64,}")  # long NUL runs: the hole a crash leaves in a log
_MAX_CONTROL_RATIO = 0.05
_MAX_HIGH_RATIO_NON_UTF8 = 0.30
_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def detect_codec(prefix: bytes) -> str | None:
    """The compression format the prefix starts with, or None."""
    for name, magic in _CODEC_MAGIC:
        if prefix.startswith(magic):
            return name
    if len(prefix) >= 10 and prefix[:3] == b"BZh" and 0x31 <= prefix[3] <= 0x39 and prefix[4:10] in _BZ2_BLOCK:
        return "bz2"
    return None


def detect_container(prefix: bytes) -> str | None:
    """"zip" or "tar" when the prefix starts an archive, else None."""
    if prefix[:4] in (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08"):
        return "zip"
    if len(prefix) >= 512 and _is_tar_header(prefix[:512]):
        return "tar"
    return None


def _is_tar_header(block: bytes) -> bool:
    if block[257:262] == b"ustar":
        return True
    # Old (v7) archives have no magic: accept only a header whose checksum is right.
    if block[0] == 0 or not block.rstrip(b"\0"):
        return False
    field = block[148:156].replace(b"\0", b" ").strip()
    if not field or not all(48 <= c <= 55 for c in field):
        return False
    return int(field, 8) in tarfile.calc_chksums(block)


def classify(prefix: bytes) -> tuple[str, dict[str, Any]]:
    """Kind (empty, elf, elf-core, text, binary) and facts of content starting with prefix."""
    if not prefix:
        return "empty", {}
    if prefix.startswith(b"\x7fELF"):
        facts = elf_facts(prefix)
        return ("elf-core" if facts.get("e_type") == ET_CORE else "elf"), facts
    encoding = text_encoding(prefix)
    if encoding is not None:
        return "text", {"encoding": encoding}
    return "binary", {}


def elf_facts(prefix: bytes) -> dict[str, Any]:
    """Class, byte order, type and machine from an ELF header (what the prefix holds of it)."""
    facts: dict[str, Any] = {}
    if len(prefix) < 6:
        return facts
    facts["elf_class"] = {1: 32, 2: 64}.get(prefix[4], 0)
    endian = {1: "<", 2: ">"}.get(prefix[5])
    facts["elf_endian"] = {"<": "little", ">": "big"}.get(endian or "", "unknown")
    if endian is None or len(prefix) < 20:
        return facts
    e_type, e_machine = struct.unpack_from(endian + "HH", prefix, 16)
    facts["e_type"] = e_type
    facts["elf_type"] = ELF_TYPES.get(e_type, f"0x{e_type:x}")
    facts["e_machine"] = e_machine
    facts["elf_machine"] = ELF_MACHINES.get(e_machine, f"0x{e_machine:x}")
    return facts


def text_encoding(prefix: bytes) -> str | None:
    """The encoding a prefix of text is in (utf-8, utf-16-le, ..., 8-bit), or None if binary."""
    for bom, encoding in _BOMS:
        if prefix.startswith(bom):
            unit = 4 if "32" in encoding else 2 if "16" in encoding else 1
            body = prefix[len(bom):]
            body = body[: len(body) - len(body) % unit]
            decoded = body.decode(encoding.replace("-sig", ""), errors="replace")
            return encoding if _text_like(decoded.encode("utf-8", errors="replace")) else None
    if not _text_like(prefix):
        return None
    # A prefix may end in the middle of a UTF-8 sequence: decode it as not final.
    try:
        codecs.getincrementaldecoder("utf-8")().decode(prefix, final=False)
        return "utf-8"
    except UnicodeDecodeError:
        pass
    high = len(prefix) - len(prefix.translate(None, _HIGH))
    return "8bit" if high <= _MAX_HIGH_RATIO_NON_UTF8 * len(prefix) else None


def _text_like(data: bytes) -> bool:
    data = _NUL_RUN.sub(b"", data)
    if not data:
        return False
    controls = len(data) - len(data.translate(None, _CONTROL))
    return controls <= _MAX_CONTROL_RATIO * len(data)
