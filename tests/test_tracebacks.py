from crashlens.model import Line, Loc
from crashlens.parsers.tracebacks import parse_tracebacks
from crashlens.text.normalize import normalize


def lines(text: str, name: str = "t.log") -> list[Line]:
    return [normalize(raw, name, i) for i, raw in enumerate(text.splitlines(), 1)]


CHAINED = """\
Traceback (most recent call last):
  File "/work/app/train.py", line 40, in step
    out = model(x)
          ^^^^^^^^
  File "/env/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1775, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
RuntimeError: CUDA error: an illegal memory access was encountered

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/work/app/train.py", line 44, in step
    open(sentinel, "w").write("failed")
FileNotFoundError: [Errno 2] No such file or directory: 'ckpt/FAILED'
"""


def test_chained_handler_failure_is_secondary():
    excs = [e for e in parse_tracebacks(lines(CHAINED)) if e.kind == "exception"]
    assert [e.facts["type"] for e in excs] == ["RuntimeError", "FileNotFoundError"]
    first, second = excs
    assert not first.facts["secondary"]
    assert second.facts["secondary"] and second.facts["link"] == "context"
    assert first.facts["chain"] == second.facts["chain"]
    assert [f.kind for f in first.frames] == ["user", "library"]
    assert first.frames[0].code == "out = model(x)" and first.frames[0].line == 40


def test_direct_cause_link():
    text = CHAINED.replace("During handling of the above exception, another exception occurred:",
                           "The above exception was the direct cause of the following exception:")
    excs = [e for e in parse_tracebacks(lines(text)) if e.kind == "exception"]
    assert excs[1].facts["link"] == "cause" and not excs[1].facts["secondary"]


def test_faulthandler_dump():
    text = """Fatal Python error: Segmentation fault

Current thread 0x00007f00 (most recent call first):
  File "/env/lib/python3.11/site-packages/lib/ops.py", line 10 in call_native
  File "/srv/job/main.py", line 5 in <module>
"""
    (exc,) = [e for e in parse_tracebacks(lines(text)) if e.kind == "exception"]
    assert exc.facts["type"] == "Fatal Python error" and exc.facts["message"] == "Segmentation fault"
    assert [f.function for f in exc.frames] == ["<module>", "call_native"]  # outermost first


def test_ipython_traceback():
    text = """---------------------------------------------------------------------------
ValueError                                Traceback (most recent call last)
Cell In[3], line 2
      1 import numpy as np
----> 2 np.zeros(-1)

ValueError: negative dimensions are not allowed
"""
    (exc,) = [e for e in parse_tracebacks(lines(text)) if e.kind == "exception"]
    assert exc.facts["type"] == "ValueError"
    assert exc.frames[0].line == 2 and exc.frames[0].code == "np.zeros(-1)"


def test_rich_boxed_traceback():
    text = """╭──────────────────── Traceback (most recent call last) ────────────────────╮
│ /srv/app/cli.py:12 in main                                               │
│                                                                          │
│ ❱ 12 │   run(cfg)                                                        │
│                                                                          │
│ /srv/app/core.py:40 in run                                               │
╰──────────────────────────────────────────────────────────────────────────╯
KeyError: 'lr'
"""
    (exc,) = [e for e in parse_tracebacks(lines(text)) if e.kind == "exception"]
    assert exc.facts["type"] == "KeyError"
    assert [(f.file, f.line) for f in exc.frames] == [("/srv/app/cli.py", 12), ("/srv/app/core.py", 40)]
    assert exc.frames[0].code == "run(cfg)"


def test_interleaved_ranks_are_separated():
    text = """[rank0]: Traceback (most recent call last):
[rank1]: Traceback (most recent call last):
[rank0]:   File "/a/train.py", line 1, in <module>
[rank1]:   File "/a/train.py", line 2, in <module>
[rank0]: ValueError: zero
[rank1]: TypeError: one
"""
    excs = [e for e in parse_tracebacks(lines(text)) if e.kind == "exception"]
    got = {(e.facts["stream"], e.facts["type"], e.frames[0].line) for e in excs}
    assert got == {("rank0", "ValueError", 1), ("rank1", "TypeError", 2)}


def test_cpp_frames_attached():
    text = """RuntimeError: CUDA error: misaligned address
Exception raised from c10_cuda_check_implementation at /src/c10/cuda/CUDAException.cpp:43 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f1 in /env/torch/lib/libc10.so)
frame #1: <unknown function> + 0x4a1b2 (0x7f2 in /env/torch/lib/libc10_cuda.so)
"""
    (exc,) = [e for e in parse_tracebacks(lines(text)) if e.kind == "exception"]
    natives = [f for f in exc.frames if f.kind == "native"]
    assert len(natives) == 2 and natives[-1].module.endswith("libc10.so")


def test_torchrun_summary():
    text = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-01-01_00:00:00
  host      : node7
  rank      : 3 (local_rank: 3)
  exitcode  : -6 (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""
    (cf,) = [e for e in parse_tracebacks(lines(text)) if e.kind == "child-failure"]
    assert cf.facts["rank"] == 3 and cf.facts["exit_code"] == -6 and cf.facts["signal"] == "SIGABRT"
