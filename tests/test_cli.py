"""The CLI end to end, as a user runs it: the console script in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from .conftest import ROOT

EXAMPLE = ROOT / "examples" / "seed-crash"


def crashlens(*args: str, cwd: Path | None = None, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("crashlens", path=str(Path(sys.executable).parent)) or shutil.which("crashlens")
    cmd = [exe] if exe else [sys.executable, "-m", "crashlens"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, "COLUMNS": "120"})


def test_version():
    r = crashlens("--version")
    assert r.returncode == 0 and "crashlens" in r.stdout


def test_analyze_example_terminal():
    r = crashlens("analyze", str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    assert "gpu-illegal-instruction" in r.stdout
    assert "Primary error" in r.stdout and "train.log:" in r.stdout
    assert "FileNotFoundError" in r.stdout  # shown as a secondary error
    assert "Traceback" not in r.stderr


def test_analyze_json_contract():
    r = crashlens("analyze", "--json", str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    schema = json.loads((ROOT / "docs" / "analysis.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["schema"] == "crashlens.analysis/1"
    top = doc["causes"][0]
    assert top["category"] == "gpu-illegal-instruction"
    assert 0 < top["confidence"] <= 1
    assert any(e["source"].endswith("train.log") and e["line"] for e in top["evidence"])
    assert doc["primary_error"]["text"].endswith("an illegal instruction was encountered")
    assert any("FileNotFoundError" in s["text"] for s in doc["secondary_errors"])
    kinds = [f["kind"] for f in doc["code_path"]]
    assert "user" in kinds and kinds[-1] == "gpu"
    assert doc["environment"]["gpus"][0]["name"].endswith("RTX 5090")


def test_analyze_markdown():
    r = crashlens("analyze", "--markdown", str(EXAMPLE))
    assert r.returncode == 0
    assert r.stdout.startswith("# crashlens analysis") and "## Code path" in r.stdout


def test_nothing_recognised_exits_1(tmp_path: Path):
    log = tmp_path / "ok.log"
    log.write_text("epoch 1 loss 0.5\nepoch 2 loss 0.4\n")
    r = crashlens("analyze", str(log))
    assert r.returncode == 1
    assert "No known root cause" in r.stdout


@pytest.mark.parametrize("content", [b"", os.urandom(4096), b"\x00" * 1000])
def test_bad_input_is_a_clear_error(tmp_path: Path, content: bytes):
    f = tmp_path / "input.bin"
    f.write_bytes(content)
    r = crashlens("analyze", str(f))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("crashlens: error:")


def test_missing_path_is_a_clear_error(tmp_path: Path):
    r = crashlens("analyze", str(tmp_path / "nope.log"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "nope.log" in r.stderr


def test_partial_report_names_what_was_skipped(tmp_path: Path):
    (tmp_path / "garbage.bin").write_bytes(os.urandom(2048))
    (tmp_path / "run.log").write_text("RuntimeError: CUDA error: out of memory\n")
    r = crashlens("analyze", "--json", str(tmp_path))
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert doc["causes"][0]["category"] == "gpu-oom"
    assert any("garbage.bin" in n for n in doc["notes"])


@pytest.mark.slow
def test_one_line_two_hundred_megabytes(tmp_path: Path):
    big = tmp_path / "one-line.log"
    with big.open("wb") as f:
        chunk = b"x" * (1 << 20)
        for _ in range(200):
            f.write(chunk)
    r = crashlens("analyze", "--json", str(big), timeout=300)
    assert r.returncode == 1, r.stderr  # nothing recognised, but no crash and no hang
    doc = json.loads(r.stdout)
    assert any("cut" in n for n in doc["notes"])


def test_compressed_archive_of_a_ci_folder(tmp_path: Path):
    import tarfile

    art = tmp_path / "artifacts"
    (art / "logs").mkdir(parents=True)
    (art / "logs" / "rank0.log").write_text(
        "[rank0]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!\n")
    archive = tmp_path / "ci-artifacts.bin"  # the name says nothing: detection is by content
    with tarfile.open(archive, "w:xz") as t:
        t.add(art, arcname="artifacts")
    r = crashlens("analyze", "--json", str(archive))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["causes"][0]["category"] == "device-or-dtype-mismatch"
    assert doc["causes"][0]["evidence"][0]["source"].endswith("ci-artifacts.bin!artifacts/logs/rank0.log")


def test_rules_commands():
    assert crashlens("rules", "validate").returncode == 0
    r = crashlens("rules", "list")
    assert r.returncode == 0 and "gpu-oom" in r.stdout
    r = crashlens("rules", "test", "-k", "cuda-out-of-memory")
    assert r.returncode == 0 and " 0 failed" in r.stdout


def test_utf16_log_from_windows(tmp_path: Path):
    log = tmp_path / "powershell-transcript.txt"
    log.write_bytes("PS C:\\work> python train.py\r\nRuntimeError: CUDA error: out of memory\r\n".encode("utf-16"))
    r = crashlens("analyze", "--json", str(log))
    assert r.returncode == 0, r.stderr
    top = json.loads(r.stdout)["causes"][0]
    assert top["category"] == "gpu-oom"
    assert top["evidence"][0]["line"] == 2 and top["evidence"][0]["text"].startswith("RuntimeError")
