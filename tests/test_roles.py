"""Which files of a bundle are logs (inputs/roles.py, data/input_roles.yaml): source code and
configuration files are noted and never become evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashlens.inputs.roles import text_role
from crashlens.pipeline import analyze_paths


@pytest.mark.parametrize("name, head, role", [
    ("bundle/run.log", b"step 1\n", "log"),
    ("bundle/train.sh.log", b"+ python train.py\n", "log"),
    ("bundle/train.py", b"import torch\n", "source"),
    ("bundle/crash.c", b"/* SIGILL */\n", "source"),
    ("bundle/launch", b"#!/bin/bash\nsrun python train.py\n", "source"),
    ("bundle/stdout", b"Traceback (most recent call last):\n", "log"),
    ("bundle/config.yaml", b"cache_dir: /dev/shm\n", "config"),
    ("bundle/pod.yaml", b"status:\n  containerStatuses:\n  - lastState:\n      terminated:\n        reason: OOMKilled\n", "log"),
    ("bundle.tar.gz!logs/requirements.txt", b"torch==2.4.0\n", "config"),
    ("<stdin>", b"RuntimeError: boom\n", "log"),
])
def test_roles(name: str, head: bytes, role: str) -> None:
    assert text_role(name, head)[0] == role


def test_source_and_config_of_a_bundle_are_not_evidence(tmp_path: Path) -> None:
    """A /dev/shm failure beside a script whose comment names ENOSPC and a config that names
    errno 28: the answer comes from the log alone, and the notes say what the other files were."""
    (tmp_path / "train.py").write_text("# retry when ENOSPC: No space left on device\nimport torch\n")
    (tmp_path / "crash.c").write_text("/* Illegal instruction (core dumped) on old CPUs */\nint main(void){return 0;}\n")
    (tmp_path / "config.yaml").write_text("retry_on: ['OSError: [Errno 28] No space left on device']\n")
    (tmp_path / "run.log").write_text(
        "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    batch = next(it)\n"
        "RuntimeError: unable to write to file </torch_41_2251>: No space left on device (28)\n")
    a = analyze_paths([tmp_path])
    assert a.causes[0].category == "shared-memory-exhausted"
    assert all(e.loc.source.endswith("run.log") for c in a.causes for e in c.evidence)
    assert "cpu-isa-unsupported" not in [c.category for c in a.causes]
    notes = " ".join(a.notes)
    assert "train.py: read as source code" in notes and "config.yaml: read as a configuration file" in notes


def test_an_executed_notebook_is_read_by_its_outputs():
    """A real notebook executed by nbconvert (fixtures/notebooks): its cells' outputs are the
    log; the error's IPython traceback gives the cause and the cell's line as the user's frame."""
    from crashlens.pipeline import analyze_paths

    nb = Path(__file__).resolve().parents[1] / "fixtures" / "notebooks" / "signups-executed.ipynb"
    assert text_role(str(nb), nb.read_bytes()[:4096])[0] == "notebook"
    a = analyze_paths([nb])
    assert a.causes[0].category == "python-exception"
    assert a.primary_error.text == "KeyError: 'signup_date'" and a.primary_error.loc.source.endswith("#outputs")
    users = [f for f in a.code_path if str(f.kind) == "user"]
    assert (users[-1].file, users[-1].line, users[-1].function) == ("Cell In[3]", 2, "weekly(frame)")
    assert any("read as a Jupyter notebook" in n for n in a.notes)


def test_torchelastic_error_files_are_read_as_their_rank_tracebacks():
    """Real error files of a torchrun run (fixtures/torchelastic): each is the traceback it holds,
    as the rank its folder names; the rank that raised first is primary, the other a consequence."""
    from crashlens.pipeline import analyze_paths

    d = Path(__file__).resolve().parents[1] / "fixtures" / "torchelastic"
    ef = d / "attempt_0" / "1" / "error.json"
    assert text_role(str(ef), ef.read_bytes()[:4096])[0] == "elastic-error"
    a = analyze_paths([d / "attempt_0"])
    assert a.causes[0].category == "python-exception"
    assert a.primary_error.text == "KeyError: 1" and a.primary_error.rank == 1
    users = [f for f in a.code_path if str(f.kind) == "user"]
    assert (users[-1].function, users[-1].line) == ("load_shard", 8)
    assert sum("read as a torchelastic error file" in n for n in a.notes) == 2
    # and beside the console log of the same run, the same answer
    b = analyze_paths([d])
    assert b.causes[0].category == "python-exception" and b.primary_error.rank == 1


def test_torchelastic_error_files_are_read_in_the_order_their_processes_failed(tmp_path):
    """The real error files of fixtures/torchelastic, with rank 1's failure made to come later:
    the earliest error file is read first and named first."""
    import json
    import shutil

    from crashlens.pipeline import analyze_paths

    src = Path(__file__).resolve().parents[1] / "fixtures" / "torchelastic" / "attempt_0"
    for r in (0, 1):
        (tmp_path / "attempt_0" / str(r)).mkdir(parents=True)
        doc = json.loads((src / str(r) / "error.json").read_text())
        if r == 0:
            doc["message"]["extraInfo"]["timestamp"] = str(int(doc["message"]["extraInfo"]["timestamp"]) - 30)
        (tmp_path / "attempt_0" / str(r) / "error.json").write_text(json.dumps(doc))
    a = analyze_paths([tmp_path])
    order = next(n for n in a.notes if n.startswith("torchelastic error files in the order"))
    assert order.index("attempt_0/0/error.json") < order.index("attempt_0/1/error.json")
    shutil.rmtree(tmp_path / "attempt_0" / "0")
    b = analyze_paths([tmp_path])
    assert not any(n.startswith("torchelastic error files in the order") for n in b.notes)
