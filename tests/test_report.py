"""`crashlens report` end to end, as a user runs it (the console script in a subprocess): the
built-in bug report, Markdown templates, GitHub issue forms, prefilled URLs, redaction."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from .conftest import ROOT
from .test_cli import crashlens

EXAMPLE = ROOT / "examples" / "seed-crash"
FORM = ROOT / "fixtures" / "issue-forms" / "bug_report.yml"
SECTIONS = ["## Summary", "## Environment", "## Steps to Reproduce", "## Expected Behavior", "## Actual Behavior",
            "## Error Messages", "## Root Cause Analysis", "### Code Path", "## Proposed Solution", "## Testing"]


def report(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return crashlens("report", *args, cwd=cwd)


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


# --- the built-in report ----------------------------------------------------------------------

def test_builtin_report_on_the_example():
    r = report(str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    positions = [out.index(s) for s in SECTIONS]
    assert positions == sorted(positions), "sections out of order"
    assert out.startswith("# torch.AcceleratorError: CUDA error: an illegal instruction was encountered")
    # environment
    assert "| Framework | torch 2.9.1+cu128 |" in out and "| CUDA runtime | 12.8 |" in out
    assert "NVIDIA GeForce RTX 5090 (compute capability 12.0, sm_120)" in out
    assert "| cuDNN | not in the logs |" in out
    # steps: the entry script of the traceback, said to lack its arguments
    steps = out[out.index("## Steps to Reproduce"):out.index("## Expected")]
    assert "python /home/ml/ocr/train.py" in steps and "arguments are not in the logs" in steps
    # error messages: the primary error (its traceback) first, the secondary marked with its reason
    errors = out[out.index("## Error Messages"):out.index("## Root Cause")]
    assert errors.index("**Primary error**") < errors.index("**Secondary errors**")
    assert "Traceback (most recent call last):" in errors and "x = F.conv2d(x, self.weight, padding=1)" in errors
    assert re.search(r"FileNotFoundError.*— \*secondary: raised while handling torch.AcceleratorError", errors)
    # root cause: ranked causes with confidence, evidence as file:line, the reasoning
    rca = out[out.index("## Root Cause Analysis"):out.index("### Code Path")]
    assert "**1. A GPU kernel executed an illegal instruction** — `gpu-illegal-instruction`, confidence 0.92" in rca
    assert "`examples/seed-crash/dmesg.txt:1`" in rca or str(EXAMPLE / "dmesg.txt") + ":1" in rca
    assert "Reasoning:" in rca and "ranked above" in rca
    code_path = out[out.index("### Code Path"):out.index("## Proposed Solution")]
    assert "validation_step" in code_path and "decoder.py:68" in code_path
    assert "compute-sanitizer" in out[out.index("## Proposed Solution"):]
    testing = out[out.index("## Testing"):]
    assert "CUDA_LAUNCH_BLOCKING=1 python /home/ml/ocr/train.py" in testing
    assert "crashlens inspect --gpu sm_120" in testing
    assert out.rstrip().endswith("crashlens redacted no items (no secrets found)")


def test_output_file_and_exit_codes(tmp_path: Path):
    out = tmp_path / "bug.md"
    r = report("-o", str(out), str(EXAMPLE))
    assert r.returncode == 0 and r.stdout == ""
    assert out.read_text().startswith("# torch.AcceleratorError")
    ok = tmp_path / "ok.log"
    ok.write_text("epoch 1 loss 0.5\nepoch 2 loss 0.4\n")
    r = report(str(ok))
    assert r.returncode == 1 and "crashlens recognised no known cause" in r.stdout
    r = report(str(tmp_path / "missing.log"))
    assert r.returncode == 2 and r.stderr.startswith("crashlens: error:")


def test_command_line_from_the_log(tmp_path: Path):
    log = tmp_path / "job.log"
    log.write_text("$ nvidia-smi -L\nGPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n"
                   "$ torchrun --nproc_per_node=8 train.py --config cfg/base.yaml\n"
                   "Traceback (most recent call last):\n  File \"/w/train.py\", line 5, in <module>\n"
                   "    loss.backward()\n"
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                   "capacity of 79.15 GiB of which 1.19 GiB is free.\n")
    r = report(str(log))
    assert r.returncode == 0, r.stderr
    steps = r.stdout[r.stdout.index("## Steps"):r.stdout.index("## Expected")]
    assert "torchrun --nproc_per_node=8 train.py --config cfg/base.yaml" in steps and "job.log:3" in steps
    assert "nvidia-smi" not in steps
    assert "max_memory_allocated" in r.stdout[r.stdout.index("## Testing"):]


# --- Markdown templates -----------------------------------------------------------------------

def test_custom_markdown_template(tmp_path: Path):
    t = tmp_path / "bug.md"
    t.write_text("---\nname: Crash\ntitle: '[crash] '\nlabels: [bug, gpu]\n---\n"
                 "# {{ title }}\n\n"
                 "Cause: {{ top.title }} ({{ top.category }}, {{ top.confidence | conf }})\n"
                 "Where: {{ primary | loc }} / {{ primary.where }}\n"
                 "GPU: {{ env.gpu_name }}, cuDNN: {{ env.cudnn or 'unknown' }}\n"
                 "Path: {{ code_path_line }}\n"
                 "{% for c in causes %}- {{ c.rule }}: {% for e in c.evidence %}{{ e | loc }} {% endfor %}\n{% endfor %}"
                 "{% for s in secondaries %}secondary {{ s.where }}: {{ s.reason | short(40) }}\n{% endfor %}"
                 "{{ primary.excerpt | fence('text') }}\n"
                 "{% import 'sections.md.j2' as s with context %}{{ s.testing_section() }}")
    r = report("--template", str(t), str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert not out.startswith("---") and "name: Crash" not in out  # front matter is not printed
    assert "Cause: A GPU kernel executed an illegal instruction (gpu-illegal-instruction, 0.92)" in out
    assert re.search(r"Where: \S*train.log:30 / \S*train.log:30", out)
    assert "GPU: NVIDIA GeForce RTX 5090, cuDNN: unknown" in out
    assert "Path: <module> (train.py:88) → " in out
    assert re.search(r"- xid-application-fault: \S*dmesg.txt:1 \S*dmesg.txt:2 \S*dmesg.txt:3", out)
    assert "secondary " in out and "```text\nTraceback (most recent call last):" in out
    assert "- Rerun with `CUDA_LAUNCH_BLOCKING=1" in out
    assert "crashlens redacted no items" in out
    # --url with a Markdown template: title (front-matter prefix), body and labels
    r = report("--template", str(t), "--url", "https://github.com/acme/trainer", str(EXAMPLE))
    q = query(r.stdout.strip())
    assert q["title"].startswith("[crash] torch.AcceleratorError") and q["labels"] == "bug,gpu"
    assert "Cause: A GPU kernel executed" in q["body"]


@pytest.mark.parametrize("body,line,message", [
    ("# {{ title }}\n\n{{ top.nope }}\n", 3, "'top.nope' is undefined (top has: category, confidence,"),
    ("{{ nothere }}", 1, "'nothere' is undefined (top-level names: actual, analysis,"),
    ("x\n{{ causes[0].evidence[0].nah }}", 2, "'causes[0].evidence[0].nah' is undefined (causes[0].evidence[0] has:"),
    ("{{ env.gpu_name }}\n{% if top %}{{ env.nothing }}{% endif %}", 2, "'env.nothing' is undefined"),
])
def test_strict_undefined_is_one_clear_line(tmp_path: Path, body: str, line: int, message: str):
    t = tmp_path / "t.md"
    t.write_text(body)
    r = report("--template", str(t), str(EXAMPLE))
    assert r.returncode == 2
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"crashlens: error: template {t}, line {line}: "), first
    assert message in first
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize("body,message", [
    ("{% for c in causes %}{{ c.title }}", "syntax error"),
    ("{{ ''.__class__.__mro__ }}", "not allowed in a template"),
    ("{{ top.title.__class__.__subclasses__() }}", "not allowed in a template"),
])
def test_template_errors_and_the_sandbox(tmp_path: Path, body: str, message: str):
    t = tmp_path / "t.md"
    t.write_text(body)
    r = report("--template", str(t), str(EXAMPLE))
    assert r.returncode == 2 and message in r.stderr.splitlines()[0] and "Traceback" not in r.stderr


# --- GitHub issue forms -----------------------------------------------------------------------

def test_issue_form_body():
    r = report("--template", str(FORM), str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    labels = re.findall(r"^### (.+)$", out, re.M)
    assert labels == ["Describe the bug", "Steps to reproduce", "Expected behavior", "Actual behavior", "Error logs",
                      "Environment", "PyTorch version", "GPU model", "Component", "Operating system",
                      "Root cause analysis", "Proposed fix", "Additional context", "Checklist"]
    assert "Thanks for taking the time" not in out  # markdown items are not part of the body

    def field(label: str) -> str:
        m = re.search(rf"^### {re.escape(label)}\n\n(.*?)(?=^### |\Z)", out, re.M | re.S)
        assert m, label
        return m.group(1).strip()

    assert field("Describe the bug").startswith("The job crashed with `torch.AcceleratorError")
    assert "python /home/ml/ocr/train.py" in field("Steps to reproduce")
    assert "runs to completion" in field("Expected behavior")
    logs = field("Error logs")  # render: shell -> a code block with the plain log
    assert logs.startswith("```shell\nTraceback (most recent call last):") and logs.endswith("```")
    assert "torch.AcceleratorError: CUDA error: an illegal instruction was encountered" in logs
    assert "[secondary: raised while handling" in logs
    env = field("Environment")  # no dump in the logs: the facts found, no "not in the logs" rows
    assert "GPU: NVIDIA GeForce RTX 5090" in env and "not in the logs" not in env
    assert field("PyTorch version") == "torch 2.9.1+cu128"
    assert field("GPU model").startswith("NVIDIA GeForce RTX 5090")
    assert field("Component") == "CUDA / GPU kernels"  # a dropdown option that matches the analysis
    assert field("Operating system") == "_No response_"  # nothing in the logs: left to the reporter
    assert "`gpu-illegal-instruction`, confidence 0.92" in field("Root cause analysis")
    assert "**Code path**" in field("Root cause analysis")
    assert "compute-sanitizer" in field("Proposed fix")
    ctx = field("Additional context")
    assert "**Testing**" in ctx and "CUDA_LAUNCH_BLOCKING=1" in ctx  # the form has no testing field
    assert "redacted no items" not in out  # crashlens's chatter stays out of the form
    assert field("Checklist") == "- [ ] I have searched the existing issues\n- [ ] I can reproduce it with the latest release"


def test_issue_form_url():
    r = report("--template", str(FORM), "--url", "https://github.com/acme/trainer", str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    url = r.stdout.strip()
    assert "\n" not in url and len(url) <= 8000
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "github.com", "/acme/trainer/issues/new")
    assert " " not in url
    q = query(url)
    assert q["template"] == "bug_report.yml"
    assert q["title"] == "[Bug]: torch.AcceleratorError: CUDA error: an illegal instruction was encountered " \
                         "(NVIDIA GeForce RTX 5090)"
    for fid in ("description", "reproduction", "expected", "actual", "logs", "environment", "torch-version", "gpu",
                "component", "analysis", "fix", "context"):
        assert q.get(fid), fid
    assert "terms" not in q and "os" not in q  # checkboxes and unmatched dropdowns are left to the reporter
    assert "torch.AcceleratorError: CUDA error: an illegal instruction was encountered" in q["logs"]
    assert q["torch-version"] == "torch 2.9.1+cu128" and q["component"] == "CUDA / GPU kernels"


def test_url_is_kept_within_the_limit():
    for extra in ([], ["--template", str(FORM)]):
        r = report(*extra, "--url", "https://github.com/acme/trainer", "--url-limit", "3000", str(EXAMPLE))
        assert r.returncode == 0, r.stderr
        url = r.stdout.strip()
        assert len(url) <= 3000, len(url)
        q = query(url)
        text = "\n".join(q.values())
        assert "lines cut by crashlens to fit the URL" in text
        # the primary error survives the cut
        assert "torch.AcceleratorError: CUDA error: an illegal instruction was encountered" in text
        assert "shortened to fit the URL" in r.stderr
    logs = query(report("--template", str(FORM), "--url", "https://github.com/acme/trainer", "--url-limit", "3000",
                        str(EXAMPLE)).stdout.strip())["logs"]
    assert logs.startswith("Traceback (most recent call last):")  # the first lines stay


def test_bad_url_and_bad_form(tmp_path: Path):
    r = report("--url", "not-a-repo", str(EXAMPLE))
    assert r.returncode == 2 and "is not a repository URL" in r.stderr
    bad = tmp_path / "config.yml"
    bad.write_text("blank_issues_enabled: false\ncontact_links: []\n")
    r = report("--template", str(bad), str(EXAMPLE))
    assert r.returncode == 2 and "not a GitHub issue form" in r.stderr
    r = report("--template", str(tmp_path / "nope.md"), str(EXAMPLE))
    assert r.returncode == 2 and "no such file" in r.stderr


# --- redaction across every output ------------------------------------------------------------

HF1 = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
HF2 = "hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"
SECRETS = {
    "hf-token": [HF1, HF2],
    "wandb-key": ["0123456789abcdef0123456789abcdef01234567"],
    "secret": ["hunter2hunter2", "abcdef123456"],
    "github-token": ["ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "ghs_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
                     "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF"],
    "openai-key": ["sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abc"],
    "anthropic-key": ["sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abcdEF"],
    "aws-key-id": ["AKIAIOSFODNN7EXAMPLE"],
    "aws-secret": ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
    "slack-token": ["xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"],
    "auth-header": ["abcdefghijklmnop1234567890"],
    "url-credential": ["s3cretPass"],
    "private-key": ["MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"],
    "jwt": ["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"],
}
PERSONAL = ["alice.smith@example.com", "/home/alice", "gpu-node-07"]
ALL = [s for v in SECRETS.values() for s in v]

PLANTED = f"""Nov 20 03:01:59 gpu-node-07 systemd[1]: Started training job.
$ WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567 torchrun --nproc_per_node=1 /home/alice/proj/train.py --hub-token {HF2} --db-password hunter2hunter2
torch 2.5.1+cu124 cuda 12.4 device NVIDIA H100 80GB HBM3
Traceback (most recent call last):
  File "/home/alice/proj/train.py", line 40, in <module>
    main(token="{HF1}", gh="ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", key="sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abc")
  File "/home/alice/proj/train.py", line 31, in main
    push(url="https://x-access-token:ghs_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789@github.com/acme/models.git", anthropic="sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abcdEF")
  File "/home/alice/proj/train.py", line 22, in push
    upload(aws_id="AKIAIOSFODNN7EXAMPLE", aws_secret_access_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", slack="xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx")
  File "/home/alice/proj/train.py", line 12, in upload
    out = model(x.cuda())  # Authorization: Bearer abcdefghijklmnop1234567890 ping alice.smith@example.com on gpu-node-07
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.50 GiB is free. Process 48211 has 77.60 GiB memory in use. (token=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF)
while loading the deploy key:
-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MmhQfRb0vOyA3fEf
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABFwAAAAdzc2gtcn
-----END RSA PRIVATE KEY-----

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/home/alice/proj/train.py", line 44, in <module>
    notify()
requests.exceptions.HTTPError: 401 jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U for url: https://alice:s3cretPass@hooks.example.com/notify?api_key=abcdef123456 cred="-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n"
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("planted")
    (d / "train.log").write_text(PLANTED)
    return d / "train.log"


def _outputs(planted: Path, *flags: str) -> dict[str, str]:
    """Every output of the planted log, URLs decoded."""
    runs = {
        "report": ("report", *flags, str(planted)),
        "form": ("report", *flags, "--template", str(FORM), str(planted)),
        "report-url": ("report", *flags, "--url", "https://github.com/acme/trainer", str(planted)),
        "form-url": ("report", *flags, "--template", str(FORM), "--url", "https://github.com/acme/trainer", str(planted)),
        "analyze-markdown": ("analyze", "--markdown", *[f for f in flags if f == "--no-redact"], str(planted)),
    }
    out = {}
    for name, args in runs.items():
        r = crashlens(*args)
        assert r.returncode == 0, (name, r.stderr)
        out[name] = unquote(r.stdout) if name.endswith("url") else r.stdout
        out[name + ":stderr"] = r.stderr
    return out


@pytest.mark.slow
def test_planted_secrets_are_redacted_in_every_output(planted: Path):
    plain = _outputs(planted, "--no-redact")
    red = _outputs(planted, "--redact", "all")
    for name in ("report", "form", "report-url", "form-url", "analyze-markdown"):
        shown = [s for s in ALL + PERSONAL if s in plain[name]]
        # the planted secrets do reach each output when redaction is off...
        minimum = {"analyze-markdown": 2, "report-url": 8, "form-url": 8}.get(name, 12)
        assert len(shown) >= minimum, (name, shown)
        assert "crashlens redacted" not in plain[name] + plain[name + ":stderr"]
        # ...and none of them with redaction on
        leaked = [s for s in ALL + PERSONAL if s in red[name]]
        assert not leaked, (name, leaked)
    # every kind reaches the full report and is redacted there, visibly
    for kind, values in SECRETS.items():
        assert any(v in plain["report"] for v in values), kind
    rep = red["report"]
    for mark in ("hf_<redacted>", "ghp_<redacted>", "ghs_<redacted>", "github_pat_<redacted>", "sk-proj-<redacted>",
                 "sk-ant-<redacted>", "AKIA<redacted>", 'aws_secret_access_key="<redacted>"', "xoxb-<redacted>",
                 "WANDB_API_KEY=<redacted>", "--db-password <redacted>", "Bearer <redacted>", "api_key=<redacted>",
                 "https://alice:<redacted>@hooks.example.com", "-----BEGIN RSA PRIVATE KEY-----\n<redacted>\n<redacted>\n",
                 "eyJ<redacted>", "<email>", "/home/<user>/proj/train.py", "on <host>"):
        assert mark in rep, mark
    footer = rep.rstrip().splitlines()[-1]
    m = re.fullmatch(r"crashlens redacted (\d+) items: (.*)", footer)
    assert m, footer
    assert int(m.group(1)) >= 18
    for label in ("2 hf tokens", "3 GitHub tokens", "2 private keys", "1 e-mail", "1 user name", "1 host name",
                  "1 W&B key", "1 AWS access key id", "1 AWS secret key", "1 OpenAI key", "1 Anthropic key",
                  "1 Slack token", "1 JWT", "1 URL credential", "1 authorization header"):
        assert label in m.group(2), label
    # the issue form body carries the line in its last free-text field; URLs say it on stderr
    assert "crashlens redacted" in red["form"] and "crashlens redacted" in red["form-url"]
    assert "crashlens redacted" in red["report-url:stderr"] and "crashlens redacted" in red["form-url:stderr"]
    assert red["analyze-markdown"].rstrip().splitlines()[-1].startswith("crashlens redacted")
    # the optional kinds stay unless asked for
    default = crashlens("report", str(planted)).stdout
    assert "/home/alice/proj" in default and not any(s in default for s in ALL)


def test_analyze_markdown_is_redacted_by_default(tmp_path: Path):
    log = tmp_path / "job.log"
    secrets = [HF1, "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AKIAIOSFODNN7EXAMPLE", "hunter2hunter2",
               "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abcdEF"]
    log.write_text(
        "Traceback (most recent call last):\n  File \"/w/train.py\", line 9, in <module>\n    model.cuda()\n"
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (HF_TOKEN={HF1} "
        f"GITHUB_TOKEN={secrets[1]} aws={secrets[2]} DB_PASSWORD={secrets[3]})\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File \"/w/train.py\", line 12, in <module>\n    report()\n"
        "RuntimeError: could not post the failure to https://hooks.example.com/" + "x" * 120 +
        f" with key {secrets[4]}\n")
    plain = crashlens("analyze", "--markdown", "--no-redact", str(log)).stdout
    assert sum(s in plain for s in secrets) >= 4 and "crashlens redacted" not in plain
    r = crashlens("analyze", "--markdown", str(log))
    assert r.returncode == 0
    assert not any(s in r.stdout for s in secrets)
    assert "sk-ant-api03" not in r.stdout  # cut short by the renderer, its visible part goes too
    assert "hf_<redacted>" in r.stdout and "DB_PASSWORD=<redacted>" in r.stdout
    assert re.search(r"crashlens redacted \d+ items: .*1 hf token", r.stdout.rstrip().splitlines()[-1])


def test_no_false_positives_end_to_end(tmp_path: Path):
    log = tmp_path / "run.log"
    log.write_text(
        "$ python train.py --resume ckpt/3f1c2a9b8e7d6c5b4a3928170f6e5d4c3b2a1908.pt --password-file /run/secrets/pw\n"
        "Traceback (most recent call last):\n"
        "  File \"/w/train.py\", line 9, in <module>\n"
        "    tok = AutoTokenizer.from_pretrained(p, pad_token='<pad>', max_tokens=512)  # sk-learn, password-protected\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered at 0x00007f5a3c000000 "
        "(build-id 0123456789abcdef0123456789abcdef01234567, TOKENIZERS_PARALLELISM=false)\n")
    r = report(str(log))
    assert r.returncode == 0, r.stderr
    for kept in ("3f1c2a9b8e7d6c5b4a3928170f6e5d4c3b2a1908", "0x00007f5a3c000000", "0123456789abcdef0123456789abcdef01234567",
                 "sk-learn, password-protected", "pad_token='<pad>'", "TOKENIZERS_PARALLELISM=false",
                 "--password-file /run/secrets/pw"):
        assert kept in r.stdout, kept
    assert r.stdout.rstrip().endswith("crashlens redacted no items (no secrets found)")
    assert "<redacted>" not in r.stdout


def test_testing_steps_and_async_flag_come_from_the_category_data():
    """data/categories.yaml: the async-CUDA rerun recipe for asynchronously reported kernel faults
    only; a launch-configuration error is raised by the launch itself."""
    from crashlens.pipeline import analyze_text
    from crashlens.report.bugreport.context import context
    from crashlens.signature import signature

    cmd = "$ python train.py --bs 64\n"
    a = analyze_text(cmd + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert a.causes[0].category == "gpu-illegal-memory-access"
    ctx = context(a, signature(a))
    assert ctx["async_gpu_error"] is True
    assert ctx["testing"][0].startswith("Rerun with `CUDA_LAUNCH_BLOCKING=1 python train.py --bs 64`")
    a = analyze_text(cmd + "RuntimeError: CUDA error: invalid configuration argument\n")
    assert a.causes[0].category == "cuda-launch-config"
    ctx = context(a, signature(a))
    assert ctx["async_gpu_error"] is False
    assert not any("CUDA_LAUNCH_BLOCKING" in s for s in ctx["testing"])
