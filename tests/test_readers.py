"""binary/readers.py (LEB128, raw notes, build-id) and the shared tables that moved with it."""

from __future__ import annotations

import struct

import pytest

from crashlens.binary.dwarfcfi import CFIError
from crashlens.binary.elf import ElfError
from crashlens.binary.readers import LEB128Error, gnu_build_id, iter_raw_notes, sleb128, uleb128
from crashlens.binary import sigframe


@pytest.mark.parametrize("raw,value", [(b"\x02", 2), (b"\x7f", 127), (b"\x80\x01", 128),
                                       (b"\xe5\x8e\x26", 624485), (b"\xff" * 9 + b"\x01", (1 << 64) - 1)])
def test_uleb128(raw, value):
    assert uleb128(raw, 0, len(raw)) == (value, len(raw))


@pytest.mark.parametrize("raw,value", [(b"\x02", 2), (b"\x7e", -2), (b"\xff\x00", 127), (b"\x81\x7f", -127),
                                       (b"\x80\x01", 128), (b"\x80\x7f", -128), (b"\xc0\xbb\x78", -123456)])
def test_sleb128(raw, value):
    assert sleb128(raw, 0, len(raw)) == (value, len(raw))


def test_leb128_errors():
    with pytest.raises(LEB128Error, match="runs past"):
        uleb128(b"\x80\x80", 0, 2)
    with pytest.raises(LEB128Error, match="longer than 10"):
        sleb128(b"\x80" * 12, 0, 12)
    with pytest.raises(CFIError):                   # the CFI reader names its own error
        uleb128(b"\x80", 0, 1, CFIError)
    assert issubclass(LEB128Error, ElfError) and issubclass(LEB128Error, ValueError)
    assert uleb128(b"\x00\x80\x01", 1, 3) == (128, 3)


def _note(owner: bytes, ntype: int, desc: bytes, step: int = 4) -> bytes:
    pad = lambda b: b + b"\0" * (-len(b) % step)  # noqa: E731
    return struct.pack("<III", len(owner), len(desc), ntype) + pad(owner) + pad(desc)


def test_raw_notes_and_build_id():
    raw = _note(b"GNU\0", 1, b"\0" * 16) + _note(b"GNU\0", 3, bytes.fromhex("deadbeef01"))
    notes = list(iter_raw_notes(raw, "<"))
    assert [(o, t) for o, t, _d in notes] == [("GNU", 1), ("GNU", 3)]
    assert gnu_build_id(notes) == "deadbeef01"
    assert list(iter_raw_notes(raw[:-4], "<"))[-1][1] == 1      # a cut note ends the walk quietly
    assert gnu_build_id(iter_raw_notes(_note(b"stapsdt\0", 3, b"xx"), "<")) is None   # owner checked


def test_signal_frame_layout():
    assert sigframe.FRAME_MCONTEXT == 48 and sigframe.UC_MCONTEXT == 40
    assert len(sigframe.SIGCONTEXT_GREGS) == 18 and sigframe.SIGCONTEXT_GREGS[:17] == sigframe.SIGCONTEXT_REGS
    assert sigframe.FRAME_MCONTEXT + 8 * 18 + 8 + 5 * 8 + 8 * 8 + 8 == sigframe.FRAME_SIGINFO   # up to uc_sigmask
    assert sigframe.FRAME_SIGINFO + 128 == sigframe.FRAME_SIZE


def test_signal_table():
    from crashlens.signals import SIGNAL_ALIASES, SIGNAL_NUMBERS, SIGNALS

    assert SIGNALS[4] == "SIGILL" and SIGNALS[11] == "SIGSEGV" and len(SIGNALS) == 31
    assert SIGNAL_NUMBERS["KILL"] == 9 and SIGNAL_NUMBERS["SIGIOT"] == SIGNAL_NUMBERS["IOT"] == 6
    assert SIGNAL_ALIASES["SIGPOLL"] == "SIGIO" and SIGNALS.get(64) is None
