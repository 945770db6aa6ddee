"""The GitHub Action (action.yml, issue 10 section 5): current action majors (no node20), an
optional Python set-up, `args` as a proper list over several lines, exit-code written once, title
and confidence exposed. The analyse step's script runs here as the runner would run it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
STEPS = ACTION["runs"]["steps"]
# majors that run on node24 (GitHub removed node20 from its runners on 2026-09-23)
CURRENT = {"actions/setup-python": 6, "actions/checkout": 5, "actions/upload-artifact": 5, "actions/cache": 5}


def test_actions_are_on_node24_majors():
    for step in STEPS:
        if "uses" in step:
            name, _, ref = step["uses"].partition("@")
            assert name in CURRENT, name
            assert re.fullmatch(r"v\d+", ref) and int(ref[1:]) >= CURRENT[name], step["uses"]


def test_python_set_up_is_optional():
    setup = next(s for s in STEPS if "setup-python" in s.get("uses", ""))
    assert setup["if"] == "inputs.python-version != ''"
    assert ACTION["inputs"]["python-version"]["default"] == ""
    install = next(s for s in STEPS if s.get("id") == "install")["run"]
    assert "-m venv" in install  # crashlens never installs into the job's own Python


def test_outputs_expose_title_and_confidence():
    assert {"signature", "signature-text", "category", "title", "confidence", "exit-code"} <= set(ACTION["outputs"])


def _outputs(path: Path) -> list[tuple[str, str]]:
    out, lines, i = [], path.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        m = re.match(r"([\w-]+)<<(.+)$", lines[i])
        if m:
            j = lines.index(m.group(2), i + 1)
            out.append((m.group(1), "\n".join(lines[i + 1:j])))
            i = j + 1
            continue
        k, _, v = lines[i].partition("=")
        out.append((k, v))
        i += 1
    return out


def _run_step(tmp_path: Path, path: str, args: str = "", fail_on: str = "") -> tuple[subprocess.CompletedProcess, list]:
    if shutil.which("bash") is None:
        pytest.skip("bash")
    script = next(s for s in STEPS if s.get("id") == "analyze")["run"]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = Path(sys.executable).parent / "crashlens"
    (bindir / "crashlens").symlink_to(exe)
    (bindir / "python").symlink_to(sys.executable)
    out = tmp_path / "github_output"
    out.write_text("")
    env = {**os.environ, "CRASHLENS_BIN": str(bindir), "CRASHLENS_PATH": path, "CRASHLENS_ARGS": args,
           "CRASHLENS_FAIL_ON": fail_on, "GITHUB_OUTPUT": str(out), "GITHUB_ACTIONS": "true",
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    r = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300)
    return r, _outputs(out)


@pytest.mark.skipif(not (Path(sys.executable).parent / "crashlens").exists(), reason="the console script")
def test_analyse_step_multi_line_args_and_outputs_once(tmp_path: Path):
    example = ROOT / "examples" / "seed-crash"
    r, outs = _run_step(tmp_path, str(example), args='--gpu H100\n--junit "reports dir/crash lens.xml"\n')
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "reports dir" / "crash lens.xml").is_file()  # the second line, quoted, was used
    keys = [k for k, _ in outs]
    assert keys.count("exit-code") == 1, keys
    got = dict(outs)
    assert got["exit-code"] == "0" and got["category"] == "gpu-illegal-instruction"
    assert got["title"] and re.fullmatch(r"0\.\d\d|1\.00", got["confidence"])


@pytest.mark.skipif(not (Path(sys.executable).parent / "crashlens").exists(), reason="the console script")
def test_analyse_step_usage_error_still_writes_exit_code_once(tmp_path: Path):
    r, outs = _run_step(tmp_path, str(tmp_path / "missing.log"))
    assert r.returncode == 2
    assert [k for k, _ in outs].count("exit-code") == 1 and dict(outs)["exit-code"] == "2"
