"""Every crash gets a cause: ordinary exceptions, wrappers, paste artefacts, the similarity
fallback and the evaluation figures, end to end through the CLI where a user would see them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from crashlens.pipeline import analyze_text
from crashlens.engine import similar
from crashlens.engine.rules import load_rules
from crashlens.evaluation.corpus import render_scores, score_row, summarise
from crashlens.text.normalize import normalize

from .conftest import ROOT

KEYERROR_IN_COLLATE = """\
Epoch 0:   3%|▎         | 12/400 [00:04<02:10,  2.97it/s, loss=2.31]
Traceback (most recent call last):
  File "/home/ana/proj/train.py", line 118, in <module>
    main()
  File "/home/ana/proj/train.py", line 97, in main
    for step, batch in enumerate(loader):
  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 701, in __next__
    data = self._next_data()
  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1465, in _next_data
    return self._process_data(data)
  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1491, in _process_data
    data.reraise()
  File "/opt/venv/lib/python3.11/site-packages/torch/_utils.py", line 715, in reraise
    raise exception
KeyError: Caught KeyError in DataLoader worker process 1.
Original Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", line 351, in _worker_loop
    data = fetcher.fetch(index)  # type: ignore[possibly-undefined]
  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/_utils/fetch.py", line 55, in fetch
    return self.collate_fn(data)
  File "/home/ana/proj/data/collate.py", line 23, in pad_collate
    labels = torch.tensor([s["label_ids"] for s in samples])
KeyError: 'label_ids'
"""

SHAPE_MISMATCH = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/work/cls/train.py", line 64, in <module>
[rank0]:     logits = model(images)
[rank0]:   File "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", line 1553, in _call_impl
[rank0]:     return forward_call(*args, **kwargs)
[rank0]:   File "/work/cls/model.py", line 31, in forward
[rank0]:     return self.head(x)
[rank0]:   File "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/linear.py", line 117, in forward
[rank0]:     return F.linear(input, self.weight, self.bias)
[rank0]: RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x12544 and 2048x10)
"""

DISK_FULL = """\
Saving model checkpoint to outputs/checkpoint-3000
Traceback (most recent call last):
  File "/srv/ft/run_sft.py", line 210, in <module>
    trainer.train()
  File "/srv/env/lib/python3.10/site-packages/transformers/trainer.py", line 2664, in _save_checkpoint
    self.save_model(output_dir, _internal_call=True)
  File "/srv/env/lib/python3.10/site-packages/safetensors/torch.py", line 286, in save_file
    serialize_file(_flatten(tensors), filename, metadata=metadata)
OSError: [Errno 28] No space left on device: 'outputs/checkpoint-3000/model-00002-of-00004.safetensors'
"""


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crashlens", *args], capture_output=True, text=True,
                          input=stdin, timeout=120)


@pytest.mark.parametrize("text,category,etype,where,frame", [
    (KEYERROR_IN_COLLATE, "python-exception", "KeyError", "user", "pad_collate (collate.py:23)"),
    (SHAPE_MISMATCH, "tensor-shape-mismatch", "RuntimeError", "framework", "forward (linear.py:117)"),
    (DISK_FULL, "disk-full", "OSError", "library", "save_file (torch.py:286)"),
])
def test_everyday_crash_end_to_end(tmp_path: Path, text: str, category: str, etype: str, where: str, frame: str):
    log = tmp_path / "run.log"
    log.write_text(text, encoding="utf-8")
    r = _cli("analyze", "--json", str(log))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["causes"][0]["category"] == category
    primary = d["primary_error"]
    assert primary is not None and etype in primary["text"]
    roots = [e for e in d["exceptions"] if etype in e["type"] and not e["secondary"]]
    ev = analyze_text(text)
    root = [e for e in ev.exceptions if e.facts.get("root")]
    assert len(root) == 1 and root[0].facts["raised_in"] == where and root[0].facts["frame"] == frame
    assert roots
    # the terminal report names the exception too
    t = _cli("analyze", str(log))
    assert etype in t.stdout


def test_reraised_worker_exception_is_the_primary_error():
    a = analyze_text(KEYERROR_IN_COLLATE)
    assert a.causes[0].category == "python-exception"
    assert a.primary_error is not None and "'label_ids'" in a.primary_error.text
    assert "Caught KeyError" not in a.primary_error.text
    explanation = a.causes[0].explanation
    assert "pad_collate (collate.py:23)" in explanation and "user code" in explanation
    assert "re-raised" in explanation and "field name" in explanation  # the KeyError hint from the data


def test_handler_failure_is_not_the_root():
    text = """\
Traceback (most recent call last):
  File "/home/u/eval.py", line 12, in evaluate
    score = metrics[name](preds, refs)
KeyError: 'bleu'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/home/u/eval.py", line 15, in evaluate
    log.write(f"failed: {name}")
AttributeError: 'NoneType' object has no attribute 'write'
"""
    a = analyze_text(text)
    roots = [e for e in a.exceptions if e.facts.get("root")]
    assert [e.facts["type"] for e in roots] == ["KeyError"]
    assert a.causes[0].category == "python-exception" and "KeyError" in a.causes[0].explanation


def test_fallback_gives_way_to_a_rule_that_explains_the_exception():
    a = analyze_text(SHAPE_MISMATCH)
    assert [c.category for c in a.causes] == ["tensor-shape-mismatch"]


def test_bare_failure_status_still_gets_a_cause():
    a = analyze_text("step 10 loss 2.1\nProcess finished with exit code 3\n")
    assert a.causes and a.causes[0].category == "python-exception" and a.primary_error is not None


def test_no_error_no_cause():
    a = analyze_text("epoch 1 done\nsaved checkpoint\nall good\n")
    assert not a.causes and a.primary_error is None


@pytest.mark.parametrize("raw,clean", [
    ("```python", ""),
    ("**RuntimeError: CUDA error: out of memory**", "RuntimeError: CUDA error: out of memory"),
    ("- `OSError: [Errno 28] No space left on device`", "OSError: [Errno 28] No space left on device"),
    ("&lt;urlopen error [Errno 110] Connection timed out&gt;", "<urlopen error [Errno 110] Connection timed out>"),
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5）", "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    ("    return forward_call(*args, **kwargs)", "    return forward_call(*args, **kwargs)"),
    ("2021-03-10T13:22:37.443Z: [1,0]<stderr>:OSError: Caught OSError", "OSError: Caught OSError"),
])
def test_paste_artefacts(raw: str, clean: str):
    assert normalize(raw, "x", 1).text == clean


def test_wrapped_signals_through_shell_and_launchers():
    glued = "Loading weights from /m/sdxl.safetensors /home/u/webui.sh: line 255:  3431 Killed  python launch.py"
    assert analyze_text(glued).causes[0].category == "host-oom-killed"
    assert analyze_text("/lib/x86_64-linux-gnu/libbz2.so.1.0.4Abandon (core dumped)\n").causes[0].category == "native-abort"
    slurm = "slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT ***"
    assert analyze_text(slurm).causes[0].category == "job-terminated-externally"


def test_hard_wrapped_message_joined_without_space():
    head = "stderr: nvidia-container-cli: initialization error, exec command: [/usr/bin/nvidia-container-cli requirement error: unsatisfied condi"
    a = analyze_text(head + "\ntion: cuda >= 12.4\n")
    assert a.causes and a.causes[0].category == "cuda-driver-too-old"


def test_similarity_proposes_below_rules_and_names_its_example():
    rules = load_rules()
    idx = similar.index_for(rules)
    score, ref, _ = idx.propose(["RuntimeError: Expected all tensors to be on the same device, but found at "
                                 "least two devices, cuda:1 and cpu!"])
    assert ref is not None and ref.category == "device-or-dtype-mismatch" and score >= similar.MIN_SIMILARITY
    # an unrecognised wording: proposed by similarity, marked so, naming the example
    unknown = "ERROR: training failed: found at least two devices, cuda:0 and cpu, expected all tensors on the same device\n"
    a = analyze_text(unknown)
    assert [c.rule for c in a.causes] == ["similarity"]
    sim = a.causes[0]
    assert sim.category == "device-or-dtype-mismatch" and "by similarity" in sim.title
    assert "resembles" in sim.explanation and a.primary_error is not None
    # beside a rule-backed cause it comes last, and never surer than the cause above it
    b = analyze_text(unknown + "./train.sh: line 12:  4242 Killed                  python train.py\n")
    # a bare "Killed" with no OOM record is read as a kill from outside (host-oom-killed comes next)
    assert b.causes[0].category == "job-terminated-externally" and b.causes[-1].rule == "similarity"
    assert "host-oom-killed" in [c.category for c in b.causes]
    assert b.causes[-1].confidence < b.causes[0].confidence


def test_eval_summary_reports_every_figure():
    rows = [score_row("a", {"category": "disk-full"}, ["disk-full"], 0.92, "r"),
            score_row("b", {"category": "gpu-oom", "also_acceptable": ["host-oom-killed"]}, ["host-oom-killed"], 0.6, "r"),
            score_row("c", {"category": "native-abort"}, [], 0.0, None)]
    s = summarise(rows)
    assert s["top1"] == pytest.approx(2 / 3) and s["top1_main"] == pytest.approx(1 / 3) and s["no_cause"] == 1
    assert s["confusion"] == [{"expected": "native-abort", "got": "(nothing)", "cases": 1}]
    assert [b["cases"] for b in s["confidence_buckets"]] == [1, 1]
    text = render_scores(s)
    assert "main label only" in text and "no cause: 1 of 3" in text and "confusion" in text


def test_schema_lists_every_taxonomy_category():
    ids = [c["id"] for c in yaml.safe_load((ROOT / "src/crashlens/data/taxonomy.yaml").read_text())["categories"]]
    schema = (ROOT / "docs" / "analysis.schema.json").read_text()
    assert all(f'"{i}"' in schema for i in ids)
    assert len(ids) == 32 and {r.category for r in load_rules().rules} == set(ids)


def test_cause_under_symptom_memory_full_explains_cudnn_status():
    text = ("| 30%   45C    P2   120W / 350W |  24210MiB / 24576MiB |     98%      Default |\n"
            "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR\n")
    a = analyze_text(text)
    assert [c.category for c in a.causes] == ["gpu-oom", "gpu-library-status-error"]
    assert a.causes[1].secondary and any("consequence of gpu-oom" in r for r in a.causes[1].reasoning)
    # with memory to spare the status stays the cause
    b = analyze_text(text.replace("24210MiB", " 1210MiB"))
    assert b.causes[0].category == "gpu-library-status-error"


def test_async_note_says_the_kernel_is_known_with_a_gpu_core():
    from crashlens.pipeline import analyze_paths

    a = analyze_paths([ROOT / "fixtures/gpu-cores/complete/lw_misaligned.nvcudmp.xz"])
    top = a.causes[0]
    assert top.category == "gpu-illegal-memory-access"
    assert "no rerun is needed" in top.explanation and "crash.cu:53" in top.explanation
    assert not any("CUDA_LAUNCH_BLOCKING" in r for r in top.remedies)
    # without the core, the rerun recipe stays
    b = analyze_text("RuntimeError: CUDA error: misaligned address\n")
    assert any("CUDA_LAUNCH_BLOCKING" in r for r in b.causes[0].remedies)
