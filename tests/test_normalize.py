from crashlens.text.normalize import clean, normalize


def test_ansi_and_progress_overdraw_removed():
    raw = "\x1b[32mEpoch 1:  10%|#         | 1/10 [00:01<00:09, 1.0it/s]\rEpoch 1: 100%|##########| 10/10 [00:10<00:00, 1.0it/s]\x1b[0m"
    assert clean(raw) == "Epoch 1: 100%|##########| 10/10 [00:10<00:00, 1.0it/s]"


def test_error_overdrawn_by_progress_bar_is_kept():
    raw = "RuntimeError: boom\r 50%|#####     | 5/10 [00:05<00:05, 1.0it/s]"
    assert "RuntimeError: boom" in clean(raw)


def test_mojibake_repaired():
    broken = "⚠️ warning: disk almost full".encode("utf-8").decode("cp1252", errors="replace")
    assert "â" in broken
    assert clean(broken).startswith("⚠")


def test_prefixes_stripped_and_rank_kept():
    ln = normalize("[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught", "a.log", 7)
    assert ln.text.startswith("[E ProcessGroupNCCL.cpp:563]")
    assert ln.stream == "rank3"
    assert ln.loc.line == 7 and ln.loc.source == "a.log"


def test_timestamps_and_syslog_header_stripped():
    assert normalize("2024-05-01T12:00:00.1234567Z RuntimeError: x", "l", 1).text == "RuntimeError: x"
    assert normalize("[2025-11-12 12:09:01,006] ERROR boom", "l", 1).text == "ERROR boom"
    ln = normalize("Jun 30 11:07:05 gpu-0 kernel: NVRM: API mismatch: a#012NVRM: b", "l", 1)
    assert ln.text == "NVRM: API mismatch: a NVRM: b"
    assert "kernel" in ln.prefix
    assert normalize("[   77.690605] NVRM: Xid (PCI:0000:00:06): 13, pid=1", "d", 1).text.startswith("NVRM: Xid")


def test_plain_line_unchanged():
    assert normalize("  File \"x.py\", line 3, in f", "l", 1).text == "  File \"x.py\", line 3, in f"
    assert normalize(">>> import torch", "l", 1).text == ">>> import torch"
