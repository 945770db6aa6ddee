"""Real `crashlens run` bundles (fixtures/run-bundles, made by bench/run/realruns.sh) read back:
each names its cause, with the figures of the moment as evidence where they decide it."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashlens.pipeline import analyze_paths

BUNDLES = Path(__file__).resolve().parents[1] / "fixtures" / "run-bundles"
EXPECTED = {
    "segv": ("native-segfault", None),
    "amx": ("cpu-isa-unsupported", None),
    "oom": ("host-oom-killed", "resource"),
    "shm": ("shared-memory-exhausted", "resource"),
    "disk": ("disk-full", "resource"),
    "timeout": ("job-terminated-externally", "outcome"),
    "torchrun": ("file-or-permission-error", None),
    "torchrun-alive": ("python-exception", "exception"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundle_names_its_cause(name):
    a = analyze_paths([BUNDLES / name])
    category, kind = EXPECTED[name]
    assert a.causes and a.causes[0].category == category, [c.category for c in a.causes[:3]]
    if kind:
        assert any(e.kind == kind for e in a.causes[0].evidence)
    # the bundle's own files are read for what they are
    notes = " ".join(a.notes)
    if (BUNDLES / name / "console.times").stat().st_size:
        assert "console.times: read as the arrival times" in notes
    assert "manifest.json: read as the manifest of a crashlens run bundle" in notes


def test_the_oom_bundle_shows_the_cgroup_counter_and_peak():
    a = analyze_paths([BUNDLES / "oom"])
    (res,) = [e for e in a.causes[0].evidence if e.kind == "resource"]
    assert res.facts["oom_kill"] == 1 and res.facts["oom_killed"] is True
    assert res.facts["peak_pct"] > 80


def test_the_shm_bundle_says_how_small_shm_was():
    a = analyze_paths([BUNDLES / "shm"])
    (res,) = [e for e in a.causes[0].evidence if e.kind == "resource"]
    assert res.facts["small"] is True and res.facts["total"] == 8 << 20


GPU_BUNDLES = BUNDLES.parent / "run-bundles-gpu"
GPU_EXPECTED = {"device-assert": "device-side-assert", "illegal-address": "gpu-illegal-memory-access",
                "cublas-full": "gpu-oom"}


@pytest.mark.parametrize("name", sorted(GPU_EXPECTED))
def test_gpu_bundle_names_its_cause(name):
    a = analyze_paths([GPU_BUNDLES / name])
    assert a.causes and a.causes[0].category == GPU_EXPECTED[name], [c.category for c in a.causes[:3]]


def test_a_full_gpu_explains_the_cublas_status():
    a = analyze_paths([GPU_BUNDLES / "cublas-full"])
    top = a.causes[0]
    assert "library-status-with-memory-full" in (top.rule, *top.other_rules)
    gpu = [e for e in top.evidence if e.kind in ("env", "resource")]
    assert gpu and "GPU 0 memory" in gpu[0].text


def test_a_gpu_core_dump_with_extended_section_numbering_is_read():
    import lzma
    import struct

    from crashlens.binary.cudacore import read_gpu_core

    data = lzma.decompress((BUNDLES.parent / "gpu-cores" / "extended" / "triton_oob.nvcudmp.xz").read_bytes())
    assert struct.unpack_from("<HH", data, 0x3C) == (0, 0xFFFF)          # e_shnum 0, e_shstrndx SHN_XINDEX
    core = read_gpu_core(data)
    assert core.sections == 399_178
    assert core.devices and core.faults, core.notes
    assert "no device table" not in " ".join(core.notes)
    a = analyze_paths([BUNDLES.parent / "gpu-cores" / "extended" / "triton_oob.nvcudmp.xz"])
    assert a.gpu_crash is not None
    assert a.gpu_crash.get("kernel") == "scale_kernel" and a.gpu_crash.get("line") == 12


def test_a_timeout_after_another_ranks_exception_is_its_consequence():
    a = analyze_paths([BUNDLES / "torchrun-alive"])
    assert a.causes[0].category == "python-exception"
    assert a.primary_error is not None and "KeyError: 3" in a.primary_error.text
    later = [c for c in a.causes if c.category == "collective-timeout-or-failure"]
    assert later and later[0].secondary


def test_damaged_bundle_records_are_skipped_not_fatal():
    """The real oom bundle's records with damaged rows and a damaged manifest added: the
    well-formed samples still give the cgroup's OOM counter, the rest is left out."""
    from crashlens.parsers.run import parse_run_manifest, parse_run_samples

    real = (BUNDLES / "oom" / "samples.jsonl").read_bytes()
    bad = (b'{"t": "x", "mem": {"MemTotal": "a"}, "cgroup": {"max": null}, "fs": {"cwd": "b"}, "gpus": "c"}\n'
           b'{"t": 1e999, "cgroup": [1, 2]}\n[1, 2]\nnot json\n')
    got = parse_run_samples(bad + real + bad, "samples.jsonl")
    (cg,) = [e for e in got if e.facts.get("resource") == "cgroup-memory"]
    assert cg.facts["oom_kill"] == 1
    assert parse_run_samples(bad, "samples.jsonl") == []
    assert parse_run_manifest(b'{"schema": "crashlens.bundle/1", "exit": [1], "stopped_from_outside": "x"}', "m")[0].facts["failed"] is False
