"""Crash signatures: the same crash gives the same id across runs; different causes do not."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from crashlens.pipeline import analyze_paths, analyze_text
from crashlens.signature import normalise_message, normalise_text, signature

from .conftest import ROOT
from .test_cli import crashlens

sys.path.insert(0, str(ROOT / "fixtures" / "cores"))
import crashers  # noqa: E402

# One training crash as two runs would log it: {ts} timestamps, {pid}, {addr}, {tmp} the job's
# temporary checkout, {rank}, {lib} a library line number (another torch patch release), {alloc}.
OOM_LOG = """\
{ts}.412 [rank{rank}]: INFO starting job pid={pid} in {tmp}
{ts}.950 [rank{rank}]: torch 2.5.1+cu124, device NVIDIA H100 80GB HBM3
[rank{rank}]: Traceback (most recent call last):
[rank{rank}]:   File "{tmp}/train.py", line 120, in <module>
[rank{rank}]:     main()
[rank{rank}]:   File "{tmp}/train.py", line 98, in main
[rank{rank}]:     loss = training_step(model, batch)
[rank{rank}]:   File "{tmp}/train.py", line 61, in training_step
[rank{rank}]:     h = F.linear(x, w)
[rank{rank}]:   File "/opt/venv/lib/python3.11/site-packages/torch/nn/functional.py", line {lib}, in linear
[rank{rank}]:     return torch._C._nn.linear(input, weight, bias)
[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc} GiB. GPU {rank} has a total capacity of 79.10 GiB of which {free} MiB is free. Process {pid} has 78.9 GiB memory in use. Object at {addr}.
"""

RUN_A = dict(ts="2026-11-20 03:02:11", pid=48211, addr="0x7f3a2c001000", tmp="/tmp/tmpk3j2l1x0/job", rank=3,
             lib=2344, alloc="2.00", free=512)
RUN_B = dict(ts="2026-12-01 22:47:09", pid=977, addr="0x55d0e8a2b3c0", tmp="/var/tmp/pytest-of-ci/pytest-12/run1",
             rank=0, lib=2360, alloc="4.25", free=88)

ILLEGAL_ADDRESS_LOG = """\
Traceback (most recent call last):
  File "{tmp}/train.py", line 61, in training_step
    h = F.linear(x, w)
RuntimeError: CUDA error: an illegal memory access was encountered
"""

GDB_LOG = """\
{ts} worker pid {pid} crashed
Thread 1 "python" received signal SIGSEGV, Segmentation fault.
#0  {addr} in knn_search (points=0x7f00aa, k=16) at /build/{tmp}/ext/knn.cpp:{lib}
#1  0x00007f1b2c3d4e5f in forward_impl () from {tmp}/site-packages/pointops/_C.cpython-311-x86_64-linux-gnu.so
#2  0x00007f1b2c3d9999 in PyObject_Call () from /usr/lib/libpython3.11.so.1.0
Segmentation fault (core dumped)
"""


def _write(tmp: Path, name: str, template: str, run: dict) -> Path:
    d = tmp / name
    d.mkdir(parents=True, exist_ok=True)
    p = d / "train.log"
    p.write_text(template.format(**run))
    return p


def test_normalise_text_replaces_what_varies():
    t = normalise_text("2026-11-20 03:02:11,412 [rank3] pid 12345 at 0x7ffd1234 in "
                       "/tmp/pytest-of-root/pytest-7/test_x0/run.log id deadbeef01 on 0000:3b:00.0 sm_90 float16")
    assert t == "N-N-N N:N:N [rankN] pid N at X in run.log id X on X sm_90 float16"
    assert normalise_text("open('/home/a/b c/data.bin') failed") == "open('data.bin') failed"
    assert normalise_message("[Sat Jan 13 10:02:11 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=123") == \
        normalise_message("[Mon Feb  2 23:59:01 2027] NVRM: Xid (PCI:0000:af:00): 79, pid=9")
    # the message stops after the sentence that makes it long enough: free memory is not in it
    m = normalise_message("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has 1 MiB free.")
    assert m == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate N GiB."


def test_same_crash_two_runs_same_signature(tmp_path: Path):
    a = analyze_paths([_write(tmp_path, "a", OOM_LOG, RUN_A)])
    b = analyze_paths([_write(tmp_path, "b", OOM_LOG, RUN_B)])
    sa, sb = signature(a), signature(b)
    assert a.causes[0].category == "gpu-oom"
    assert sa.id == sb.id and sa.text == sb.text
    assert len(sa.id) == 16 and int(sa.id, 16) >= 0
    assert sa.text == ("gpu-oom | train.py:<module> > train.py:main > train.py:training_step > F.linear | "
                       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate N GiB.")
    # nothing of what varied is in the parts
    blob = json.dumps(sa.parts)
    for run in (RUN_A, RUN_B):
        for k in ("pid", "addr", "lib"):
            assert str(run[k]) not in blob
        assert "tmp" not in blob and "pytest" not in blob


def test_user_line_numbers_and_library_frames_do_not_split(tmp_path: Path):
    base = analyze_paths([_write(tmp_path, "a", OOM_LOG, RUN_A)])
    edited = OOM_LOG.replace("line 61, in training_step", "line 75, in training_step")
    moved = analyze_paths([_write(tmp_path, "b", edited, RUN_A)])
    assert signature(base).id == signature(moved).id


def test_different_causes_different_signatures(tmp_path: Path):
    oom = signature(analyze_paths([_write(tmp_path, "a", OOM_LOG, RUN_A)]))
    ima = signature(analyze_paths([_write(tmp_path, "b", ILLEGAL_ADDRESS_LOG, RUN_A)]))
    assert ima.parts["category"] == "gpu-illegal-memory-access"
    assert oom.id != ima.id
    # same category, another user function: another crash
    other_fn = OOM_LOG.replace("in training_step", "in validation_step")
    other = signature(analyze_paths([_write(tmp_path, "c", other_fn, RUN_A)]))
    assert other.id != oom.id and "train.py:validation_step" in other.text
    # same place, another error text
    other_msg = ILLEGAL_ADDRESS_LOG.replace("an illegal memory access", "misaligned address")
    assert signature(analyze_paths([_write(tmp_path, "d", other_msg, RUN_A)])).id != ima.id


def test_native_backtrace_in_log(tmp_path: Path):
    a = signature(analyze_paths([_write(tmp_path, "a", GDB_LOG, RUN_A)]))
    b = signature(analyze_paths([_write(tmp_path, "b", GDB_LOG, RUN_B)]))
    assert a.id == b.id
    assert a.parts["category"] == "native-segfault"
    assert a.parts["message"] == 'Thread N "python" received signal SIGSEGV, Segmentation fault.'


def test_unrecognised_log_has_a_signature():
    s = signature(analyze_text("hello\nall good\n"))
    assert s.parts["category"] == "unrecognised" and len(s.id) == 16


def test_signature_in_json_terminal_and_markdown(tmp_path: Path):
    p = _write(tmp_path, "a", OOM_LOG, RUN_A)
    q = _write(tmp_path, "b", OOM_LOG, RUN_B)
    ja = json.loads(crashlens("analyze", "--json", str(p)).stdout)["signature"]
    jb = json.loads(crashlens("analyze", "--json", str(q)).stdout)["signature"]
    assert ja == jb and set(ja) == {"id", "text"}
    term = crashlens("analyze", str(p))
    assert "Signature" in term.stdout and ja["id"] in term.stdout
    md = crashlens("analyze", "--markdown", str(p))
    assert f"**Signature:** `{ja['id']}`" in md.stdout


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed to build the crashing programs")
def test_real_cores_same_program_same_signature(tmp_path: Path):
    progs = {}
    for name in ("segv", "fpe"):
        progs[name] = crashers.build(name, tmp_path)
    sigs = {}
    for name, run in (("segv", 1), ("segv", 2), ("fpe", 1)):
        d = tmp_path / f"{name}-{run}"
        d.mkdir()
        c = crashers.crash([str(progs[name])], d)
        if c.core is None:
            pytest.skip(f"no core file: {c.why}")
        a = analyze_paths([c.core])
        assert a.crash is not None
        sigs[(name, run)] = (signature(a), c.pid, hex(a.crash.pc or 0))
    (s1, pid1, pc1), (s2, pid2, pc2) = sigs[("segv", 1)], sigs[("segv", 2)]
    assert pid1 != pid2
    assert s1.id == s2.id, (s1, s2)
    assert s1.parts["category"] == "native-segfault" and s1.parts["signal"] == "SIGSEGV"
    # the crash site is the innermost frame (callers follow when the unwinder gives a backtrace)
    assert s1.parts["frames"][-1] == "segv!store_value" and s1.parts["module"] == "segv"
    assert str(pc1) not in s1.text and str(pid1) not in json.dumps(s1.parts)
    assert sigs[("fpe", 1)][0].id != s1.id
