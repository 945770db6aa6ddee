"""Turn run.sh's output (a folder or realruns.tar) into a fixture set with the batch's labels.

    python3 bench/gpu/realruns/collect.py /tmp/realruns [fixtures/real-runs-gpu] [labels.yaml]
    python3 bench/gpu/realruns/collect.py /tmp/realruns2 fixtures/real-runs-gpu2 labels2.yaml
"""
import re
import shutil
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def main() -> None:
    src = Path(sys.argv[1])
    dest = Path(sys.argv[2] if len(sys.argv) > 2 else HERE.parents[2] / "fixtures" / "real-runs-gpu")
    labels = yaml.safe_load((HERE / (sys.argv[3] if len(sys.argv) > 3 else "labels.yaml")).read_text())
    versions = (src / "versions.txt").read_text().splitlines()
    for n, (name, lab) in enumerate(labels["cases"].items(), start=1):
        run = src / name
        log = (run / "input.log").read_text(errors="replace")
        primary = None
        if lab.get("primary"):
            text = log + ("\n" + (run / "dmesg.txt").read_text(errors="replace") if (run / "dmesg.txt").exists() else "")
            primary = next(line.strip() for line in text.splitlines() if lab["primary"] in line)
            # a progress-bar frame with the error written after it (str.splitlines cut at the \r's):
            # the error is what follows the bar
            primary = re.sub(r"^.*?\d{1,3}%\|[^|]*\|\s*[\d.]+/[\d.?]+\s*\[[^\]]*\]", "", primary).strip()
        case_dir = dest / "cases" / f"{n:03d}-{name}"
        case_dir.mkdir(parents=True, exist_ok=True)
        inputs = ["input.log"]
        shutil.copy(run / "input.log", case_dir / "input.log")
        if (run / "dmesg.txt").exists():
            shutil.copy(run / "dmesg.txt", case_dir / "dmesg.txt")
            inputs.append("dmesg.txt")
        card = "H100" if "H100" in (src / "nvidia-smi.txt").read_text(errors="replace") else "H200"
        case = {"category": lab["category"], "also_acceptable": lab.get("also_acceptable", []),
                "source": f"real run of bench/gpu/realruns/run.sh ({name}) on an NVIDIA {card} host, "
                          f"{versions[1] if len(versions) > 1 else ''}, 2026-11-28",
                "title": name, "evidence": lab["evidence"], "primary_error_line": primary,
                "user_frame": lab.get("user_frame"), "failing_rank": lab.get("failing_rank"),
                "family": lab["family"], "inputs": inputs}
        (case_dir / "case.yaml").write_text(yaml.safe_dump(case, sort_keys=False, width=120))
    shutil.copy(src / "nvidia-smi.txt", dest / "nvidia-smi.txt")
    shutil.copy(src / "versions.txt", dest / "versions.txt")


if __name__ == "__main__":
    main()
