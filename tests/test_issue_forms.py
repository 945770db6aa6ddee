"""Real issue forms (issue 10, section 5): forms with the structure of PyTorch's, Lightning's,
Transformers' and vLLM's bug-report forms (fixtures/issue-forms/, written for these tests: the
same field types, ids and missing ids, render and default values) filled from a crash whose log
holds collect_env's output, a command and a traceback."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from crashlens.pipeline import analyze_paths
from crashlens.report.bugreport import ReportOptions, make_report
from crashlens.signature import signature

from .conftest import ROOT

FORMS = ROOT / "fixtures" / "issue-forms"
CRASH = FORMS / "crash"
TRACEBACK_HEAD = 'File "/home/ml/proj/train.py", line 61, in <module>'
TRACEBACK_LAST = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB."
ENV_LINES = ("PyTorch version: 2.5.1+cu124", "Nvidia driver version: 550.54.15", "[pip3] triton==3.1.0")
CHATTER = ("redacted no items", "not in the logs", str(ROOT), "fixtures/issue-forms", "crashlens: ")


@pytest.fixture(scope="module")
def analysis():
    a = analyze_paths([str(CRASH)])
    return a, signature(a)


def body(analysis, form: str, **kw) -> dict[str, str]:
    a, sig = analysis
    text = make_report(a, sig, ReportOptions(template=FORMS / form, **kw)).text
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^### (.+?)\n\n(.*?)(?=^### |\Z)", text, re.M | re.S)}


def url(analysis, form: str):
    a, sig = analysis
    r = make_report(a, sig, ReportOptions(template=FORMS / form, url="https://github.com/o/r"))
    return dict(parse_qsl(urlsplit(r.text.strip()).query)), r.messages


def no_chatter(fields: dict[str, str]) -> None:
    for label, v in fields.items():
        for c in CHATTER:
            assert c not in v, (label, c)


def test_pytorch_form_full_traceback_and_collect_env(analysis):
    f = body(analysis, "pytorch-bug-report.yml")
    assert list(f) == ["🐛 Describe the bug", "Versions"]
    bug = f["🐛 Describe the bug"]
    assert TRACEBACK_HEAD in bug and TRACEBACK_LAST in bug  # the full traceback, as asked
    assert "    scores = q @ k.transpose(-2, -1)" in bug
    for ln in ENV_LINES:  # collect_env's output, verbatim
        assert ln in f["Versions"]
    assert f["Versions"].startswith("```")
    no_chatter(f)


def test_vllm_form_environment_in_its_details_block(analysis):
    f = body(analysis, "vllm-bug-report.yml")
    env = f["Your current environment"]
    assert env.startswith("<details>") and "<summary>The output of <code>python collect_env.py</code></summary>" in env
    assert env.rstrip().endswith("</details>") and all(ln in env for ln in ENV_LINES)
    assert "Your output of `python collect_env.py` here" not in env
    assert TRACEBACK_HEAD in f["🐛 Describe the bug"]
    assert f["Before submitting a new issue..."].startswith("- [ ]")  # checkboxes stay the reporter's
    no_chatter(f)


def test_lightning_form_by_description_and_render(analysis):
    f = body(analysis, "lightning-bug-report.yml")
    assert f["How to reproduce the bug"] == "_No response_"  # render: python gets no shell command
    logs = f["Error messages and logs"]
    assert TRACEBACK_HEAD in logs and "# Error messages and logs here please" not in logs
    env = f["Environment"]
    assert "<summary>Current environment</summary>" in env and all(ln in env for ln in ENV_LINES)
    assert "#- Lightning version" not in env
    more = f["More info"]  # matched by its description ("any other info"): the analysis goes there
    assert "Root cause analysis" in more and "`gpu-oom`" in more and "Proposed solution" in more
    no_chatter(f)


def test_transformers_form_by_id_and_description(analysis):
    f = body(analysis, "transformers-bug-report.yml")
    assert all(ln in f["System Info"] for ln in ENV_LINES)  # `transformers env`: the dump
    assert f["Who can help?"] == "_No response_"  # maintainers' handles are the reporter's to pick
    rep = f["Reproduction"]
    assert "python train.py --config configs/a100.yaml --batch-size 512" in rep
    assert TRACEBACK_HEAD in rep  # "error messages or stack traces, put them here as well"
    assert "runs to completion" in f["Expected behavior"]
    no_chatter(f)


@pytest.mark.parametrize("form", ["pytorch-bug-report.yml", "lightning-bug-report.yml", "vllm-bug-report.yml"])
def test_url_without_ids_falls_back_to_title_and_body(analysis, form):
    q, messages = url(analysis, form)
    assert "template" not in q  # a template= URL would open the form with its fields empty
    assert q["title"].startswith(("torch.OutOfMemoryError", "[Bug]: torch.OutOfMemoryError"))
    assert TRACEBACK_LAST in q["body"] and "PyTorch version: 2.5.1+cu124" in q["body"]
    assert any("have no `id`" in m and "blank issue" in m for m in messages), messages


def test_url_with_ids_prefills_the_form(analysis):
    q, messages = url(analysis, "transformers-bug-report.yml")
    assert q["template"] == "transformers-bug-report.yml"
    assert "PyTorch version: 2.5.1+cu124" in q["system-info"] and TRACEBACK_HEAD in q["reproduction"]
    assert "who-can-help" not in q
    assert not any("have no `id`" in m for m in messages)


def test_secrets_in_the_environment_dump_are_redacted(analysis, tmp_path: Path):
    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    log = (CRASH / "run.log").read_text(encoding="utf-8").replace(
        "cuDNN version: 9.1.0", f"cuDNN version: 9.1.0\nHF token: {token}")
    (tmp_path / "run.log").write_text(log, encoding="utf-8")
    a = analyze_paths([str(tmp_path / "run.log")])
    f = body((a, signature(a)), "pytorch-bug-report.yml")
    assert token not in "".join(f.values()) and "cuDNN version: 9.1.0" in f["Versions"]
