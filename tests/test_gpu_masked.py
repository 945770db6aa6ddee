"""The seed-style masked case with a real, complete GPU core dump: a CUDA error hidden by the
handler's own exception; the core names the kernel, checked against cuda-gdb on the same dump."""

from __future__ import annotations

import re

from crashlens.pipeline import analyze_paths

from .conftest import ROOT

DIR = ROOT / "fixtures" / "gpu-cores"


def _cuda_gdb() -> dict[str, str]:
    text = (DIR / "masked" / "torch_embed_nr.cuda-gdb.txt").read_text(encoding="utf-8")
    focus = re.search(r"block \((?P<block>[\d,]+)\), thread \((?P<thread>[\d,]+)\)", text)
    kernel = re.search(r"in (?:void )?(?P<kernel>[\w:]+)<", text)
    exc = re.search(r"^\*\s+\d+\s+active\s+0x[0-9a-f]+\s+\([\d,]+\)\s+(?P<exc>.+?)\s*$", text, re.M)
    return {"block": f"({focus['block']})", "thread": f"({focus['thread']})", "kernel": kernel["kernel"],
            "exception": exc["exc"]}


def test_masked_case_with_a_gpu_core_names_the_kernel():
    want = _cuda_gdb()
    a = analyze_paths([DIR / "torch_embed.log", DIR / "masked" / "torch_embed_nr.nvcudmp.xz"])
    top = a.causes[0]
    assert top.category == "device-side-assert"
    g = a.gpu_crash
    assert want["kernel"] in g["kernel"] and g["block"] == want["block"] and g["thread"] == want["thread"]
    assert g["exception"] == want["exception"] and g["device_name"].startswith("NVIDIA H100")
    assert want["kernel"] in top.explanation and "no rerun is needed" in top.explanation
    # the handler's exception is reported as secondary, not as the cause
    assert any("handler failed" in s.reason or "handling" in s.reason for s in a.secondary_errors)
    # the code path ends in the kernel
    assert want["kernel"] in (a.code_path[-1].function + a.code_path[-1].code)
