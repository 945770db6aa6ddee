"""Public contracts (issue 10, section 5): the JSON schemas of analyze, inspect and triage (required
keys, shipped in the wheel), the Python API, packaging metadata and the README's commands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

import crashlens

from .conftest import ROOT

EXAMPLE = ROOT / "examples" / "seed-crash"
EXE = Path(sys.executable).parent / "crashlens"
CMD = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "crashlens"]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def cli_json(*args: str, cwd: Path = ROOT) -> dict:
    r = subprocess.run([*CMD, *args], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", ["analysis", "inspect", "triage"])
def test_schemas_are_valid_and_shipped(name):
    schema = crashlens.schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert f"crashlens.{name}/1" in schema["title"]
    assert set(schema["required"]) == set(schema["properties"])  # every top-level key is always there
    force = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert force[f"docs/{name}.schema.json"] == f"crashlens/schemas/{name}.schema.json"


def test_analyze_json_has_every_required_key():
    doc = cli_json("analyze", "--json", str(EXAMPLE))
    jsonschema.validate(doc, crashlens.schema("analysis"))
    empty = cli_json("analyze", "--json", str(ROOT / "README.md"))  # nothing recognised: keys still there
    jsonschema.validate(empty, crashlens.schema("analysis"))


def test_inspect_json_matches_its_schema():
    bins = ROOT / "fixtures" / "binaries"
    doc = cli_json("inspect", "--json", "--gpu", "H100", str(bins / "libaxpy_sm80.so"), str(bins / "dlink_app"),
                   str(bins / "axpy.cu"))
    jsonschema.validate(doc, crashlens.schema("inspect"))
    assert doc["files"][0]["cuda"]["sass"]


def test_triage_json_matches_its_schema(tmp_path: Path):
    for i in range(2):
        b = tmp_path / f"run{i}"
        b.mkdir()
        (b / "train.log").write_text((EXAMPLE / "train.log").read_text(encoding="utf-8"), encoding="utf-8")
    doc = cli_json("triage", "--json", "-j", "1", str(tmp_path))
    jsonschema.validate(doc, crashlens.schema("triage"))
    assert doc["groups"] and doc["groups"][0]["count"] == 2


def test_python_api_paths_text_and_to_dict():
    a = crashlens.analyze(EXAMPLE)
    assert isinstance(a, crashlens.Analysis)
    assert a.causes[0].category == "gpu-illegal-instruction"
    d = a.to_dict()
    jsonschema.validate(d, crashlens.schema("analysis"))
    assert d["signature"]["id"] == a.signature.id == cli_json("analyze", "--json", str(EXAMPLE))["signature"]["id"]
    t = crashlens.analyze((EXAMPLE / "train.log").read_text(encoding="utf-8"))  # the text of a log
    assert t.causes[0].category == "gpu-illegal-instruction"
    assert crashlens.analyze([EXAMPLE / "train.log"], gpu="H100").causes
    with pytest.raises(crashlens.errors.InputError):
        crashlens.analyze("no/such/file.log")
    from crashlens import pipeline  # the stages' wiring, for callers that want Options

    assert pipeline.analyze_paths and crashlens.analyze(EXAMPLE).causes


def test_packaging_metadata():
    lic = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in lic and "Version 2.0, January 2004" in lic and "END OF TERMS AND CONDITIONS" in lic
    proj = PYPROJECT["project"]
    assert proj["license"] == {"text": "Apache-2.0"}
    assert "License :: OSI Approved :: Apache Software License" in proj["classifiers"]
    assert any(c.startswith("Programming Language :: Python :: 3.1") for c in proj["classifiers"])
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(proj["urls"])


def test_readme_links_are_absolute_for_pypi():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert links and all(u.startswith("https://") for u in links), links


def test_readme_eval_example_works_from_any_clone():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^crashlens eval (\S+)", readme, re.M)
    assert m and not m.group(1).startswith(".."), "the example must name a folder inside the repository"
    assert (ROOT / m.group(1)).is_dir()
    r = subprocess.run([*CMD, "eval", m.group(1)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "top-1" in r.stdout.lower() or "top1" in r.stdout.lower()
