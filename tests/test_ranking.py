"""Ranking across evidence: primary vs secondary errors, consequences, async CUDA errors."""

from __future__ import annotations

from crashlens.pipeline import analyze_text


def cats(a):
    return [c.category for c in a.causes]


def test_handler_failure_does_not_hide_cuda_error():
    log = """Traceback (most recent call last):
  File "/srv/job/train.py", line 30, in validation_step
    y = self.net(batch)
  File "/srv/job/net.py", line 12, in forward
    return F.conv2d(x, self.w)
RuntimeError: CUDA error: an illegal instruction was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/job/train.py", line 35, in validation_step
    open("ckpt/FAILED", "w")
FileNotFoundError: [Errno 2] No such file or directory: 'ckpt/FAILED'
"""
    a = analyze_text(log, "run.log")
    assert cats(a)[0] == "gpu-illegal-instruction"
    assert "device-side-assert" not in cats(a)  # the PyTorch footer is not evidence
    assert a.primary_error is not None and "illegal instruction" in a.primary_error.text
    assert any("FileNotFoundError" in s.evidence.text for s in a.secondary_errors)
    # async: the explanation names the sync point and the rerun recipe is given
    top = a.causes[0]
    assert "synchronisation point" in top.explanation and "net.py:12" in top.explanation
    assert any("CUDA_LAUNCH_BLOCKING=1" in r for r in top.remedies)
    assert any("compute-sanitizer" in r for r in top.remedies)
    # code path: user frames then the failing GPU operation
    kinds = [f.kind for f in a.code_path]
    assert kinds[:2] == ["user", "user"] and kinds[-1] == "gpu"


def test_nccl_timeout_is_a_consequence_of_a_rank_that_died():
    log = """[rank2]:/src/Indexing.cu:1236: indexSelectSmallIndex: block: [0,0,0], thread: [1,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
[rank2]: RuntimeError: CUDA error: device-side assert triggered
[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=91, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.
[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=91, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600051 milliseconds before timing out.
"""
    a = analyze_text(log)
    assert cats(a)[0] == "device-side-assert"
    nccl = next(c for c in a.causes if c.category == "collective-timeout-or-failure")
    assert nccl.secondary and any("consequence" in r for r in nccl.reasoning)
    assert a.causes[0].confidence > nccl.confidence


def test_nccl_timeout_alone_is_primary():
    log = "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800100 milliseconds before timing out.\n"
    a = analyze_text(log)
    assert cats(a) == ["collective-timeout-or-failure"]
    assert "ALLREDUCE" in a.causes[0].explanation


def test_xid43_after_assert_is_secondary(tmp_path):
    from crashlens.pipeline import analyze_paths

    (tmp_path / "run.log").write_text(
        "/src/Loss.cu:250: nll_loss_kernel: block: [0,0,0], thread: [2,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
        "RuntimeError: CUDA error: device-side assert triggered\n")
    (tmp_path / "dmesg.txt").write_text("[  301.1] NVRM: Xid (PCI:0000:00:06): 43, pid=851, name=python3, channel 0x0000000a\n")
    a = analyze_paths([tmp_path / "run.log", tmp_path / "dmesg.txt"])
    assert cats(a)[0] == "device-side-assert"
    assert "t >= 0 && t < n_classes" in a.causes[0].explanation
    assert "nll_loss_kernel" in a.causes[0].explanation
    xid = [c for c in a.causes if c.rule == "xid-channel-stopped" or "xid-channel-stopped" in c.other_rules]
    assert xid and xid[0].secondary


def test_specific_cause_beats_generic_abort():
    log = """terminate called after throwing an instance of 'c10::Error'
  what():  CUDA error: out of memory
Aborted (core dumped)
"""
    a = analyze_text(log)
    assert cats(a)[0] == "gpu-oom"
    assert "native-abort" in cats(a)


def test_every_cause_explains_itself():
    a = analyze_text("Segmentation fault (core dumped)\n", "x.log")
    (c,) = a.causes
    assert c.category == "native-segfault"
    assert c.evidence[0].loc.source == "x.log" and c.evidence[0].loc.line == 1
    assert c.reasoning and c.remedies and c.explanation


def test_nothing_recognised():
    a = analyze_text("epoch 1 loss 0.3\nepoch 2 loss 0.2\n")
    assert a.causes == ()


def test_torchrun_root_cause_is_checked_against_the_evidence(root):
    from crashlens.pipeline import analyze_paths

    a = analyze_paths([root / "fixtures" / "logs" / "torchrun-oom-rank1-sigterm-rank0.log"])
    top = a.causes[0]
    assert top.category == "gpu-oom"
    assert any("torchrun names rank 0" in r and "rank(s) 1" in r for r in top.reasoning)
    reasons = [s.reason for s in a.secondary_errors]
    assert any("SIGTERM sent by torchrun" in r for r in reasons)


def test_stalled_rank_is_named_from_the_ranks_that_timed_out():
    log = "".join(
        f"[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
        f"OpType=ALLGATHER, NumelIn=1, NumelOut=4, Timeout(ms)=600000) ran for 600100 milliseconds before timing out.\n"
        for r in (1, 2, 3))
    a = analyze_text(log)
    assert "rank(s) 0 did not get there" in a.causes[0].explanation
    assert "ALLGATHER" in a.causes[0].explanation


def test_lagging_rank_from_enqueued_work_ids():
    log = "".join(
        f"[rank{r}]:[E1126 10:00:00.000 ProcessGroupNCCL.cpp:1600] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Timeout at NCCL work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.\n"
        for r, seq in ((0, 12), (1, 12), (2, 9), (3, 12)))
    a = analyze_text(log)
    top = a.causes[0]
    assert top.category == "collective-timeout-or-failure"
    assert "rank(s) 2 did not get there" in top.explanation
