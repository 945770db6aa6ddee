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
