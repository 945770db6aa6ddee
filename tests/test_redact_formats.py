"""Redaction holds on real secret formats in every output that leaves the machine.

A corpus of secret formats modelled on gitleaks' default rules (data/secrets.yaml names the
rule each format follows) plus the contexts that make a plain value a secret. Every secret is
generated here at random (never a real one). Each format is planted, each time with a fresh
secret, in five places of one crash bundle: the error line, a traceback source line, the command
line, an archive member name and an `env` dump. Then no part of any secret may appear in
`report` (body, `--url`, an issue form), `analyze --markdown`, `--github` (annotations, the
grouped report, the step summary, GITHUB_OUTPUT), `--junit`, `--codequality`, `--json --redact`,
the terminal report with `--redact`, or `triage` (text, JSON and its SQLite database).
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import string
import urllib.parse
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

from crashlens.cli import main
from crashlens.redaction import KINDS, formats, redact

ROOT = Path(__file__).resolve().parents[1]
FORM = ROOT / "fixtures" / "issue-forms" / "bug_report.yml"

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"


def _rand(rng: random.Random, chars: str, n: int) -> str:
    # at least one digit, one lower and one upper case letter where the alphabet has them, so a
    # value looks like the random token it stands for
    while True:
        s = "".join(rng.choice(chars) for _ in range(n))
        need = [set(c) & set(chars) for c in (string.digits, string.ascii_lowercase, string.ascii_uppercase)]
        if all(not n_ or set(s) & n_ for n_ in need):
            return s


@dataclass(frozen=True)
class Planted:
    text: str  # what is written into the bundle
    secrets: tuple[str, ...]  # the random parts: none of them, nor any 10 characters of them, may leave
    extra: str = ""  # a line written far above the crash (the context some formats need)


Gen = Callable[[random.Random], Planted]


def _token(prefix: str, chars: str, n: int, suffix: str = "") -> Gen:
    def gen(rng: random.Random) -> Planted:
        body = _rand(rng, chars, n)
        return Planted(f"{prefix}{body}{suffix}", (body,))
    return gen


def _fmt(template: str, *parts: tuple[str, int], extra: str = "") -> Gen:
    """template with {0}, {1}, … filled by random parts (alphabet, length)."""
    def gen(rng: random.Random) -> Planted:
        values = [_rand(rng, chars, n) for chars, n in parts]
        return Planted(template.format(*values), tuple(values), extra)
    return gen


def _aws_far(rng: random.Random) -> Planted:
    key_id = "AKIA" + _rand(rng, string.ascii_uppercase + "234567", 16)
    secret = _rand(rng, B64, 40)
    return Planted(secret, (secret, key_id[4:]), extra=f"aws configure set aws_access_key_id {key_id}")


def _openai_legacy(rng: random.Random) -> Planted:
    a, b = _rand(rng, ALNUM, 20), _rand(rng, ALNUM, 20)
    return Planted(f"sk-{a}T3BlbkFJ{b}", (a, b))


def _pem_escaped(rng: random.Random) -> Planted:
    body = [_rand(rng, B64, 64) for _ in range(3)]
    text = "-----BEGIN PRIVATE KEY-----\\n" + "\\n".join(body) + "\\n-----END PRIVATE KEY-----\\n"
    return Planted(text, tuple(body))


def _azure_ad(rng: random.Random) -> Planted:
    secret = f"{_rand(rng, ALNUM, 3)}8Q~{_rand(rng, URLSAFE, 34)}"
    return Planted(secret, (secret,))


def _slack(kind: str) -> Gen:
    def gen(rng: random.Random) -> Planted:
        a, b, c = _rand(rng, string.digits, 12), _rand(rng, string.digits, 13), _rand(rng, ALNUM, 32)
        return Planted(f"{kind}-{a}-{b}-{c}", (a + "-" + b, c))
    return gen


# format -> generator (41 gitleaks-style formats and the contexts the issue names)
CORPUS: dict[str, Gen] = {
    "github-pat": _token("ghp_", ALNUM, 36),
    "github-oauth": _token("gho_", ALNUM, 36),
    "github-fine-grained-pat": _fmt("github_pat_{0}_{1}", (ALNUM, 22), (ALNUM, 59)),
    "gitlab-pat": _token("glpat-", URLSAFE, 20),
    "gitlab-runner-token": _token("glrt-", URLSAFE, 20),
    "huggingface": _token("hf_", string.ascii_letters, 34),
    "openai-legacy": _openai_legacy,
    "openai-project": _token("sk-proj-", URLSAFE, 156),
    "anthropic": _fmt("sk-ant-api03-{0}AA", (URLSAFE, 93)),
    "slack-bot": _slack("xoxb"),
    "slack-user": _slack("xoxp"),
    "slack-webhook": _fmt("https://hooks.slack.com/services/T{0}/B{1}/{2}", (string.ascii_uppercase + string.digits, 8),
                          (string.ascii_uppercase + string.digits, 10), (ALNUM, 24)),
    "aws-key-id": _token("AKIA", string.ascii_uppercase + "234567", 16),
    "aws-secret-named": _fmt("aws_secret_access_key {0}", (B64, 40)),
    "aws-secret-far-from-key-id": _aws_far,
    "gcp-api-key": _token("AIza", URLSAFE, 35),
    "google-oauth": _token("ya29.", URLSAFE, 120),
    "stripe-live": _token("sk_live_", ALNUM, 24),
    "stripe-restricted": _token("rk_live_", ALNUM, 24),
    "azure-storage-key": _fmt("DefaultEndpointsProtocol=https;AccountName=mlstore;AccountKey={0}==;EndpointSuffix=core.windows.net",
                              (B64, 86)),
    "azure-ad-client-secret": _azure_ad,
    "azure-sas": _fmt("https://mlstore.blob.core.windows.net/ckpt/model.pt?sv=2024-11-04&sp=r&sig={0}%3D", (ALNUM, 43)),
    "npm": _token("npm_", ALNUM, 36),
    "pypi": _fmt("pypi-AgEIcHlwaS5vcmc{0}", (URLSAFE, 70)),
    "databricks": _token("dapi", HEX, 32),
    "sendgrid": _fmt("SG.{0}.{1}", (URLSAFE, 22), (URLSAFE, 43)),
    "twilio": _token("SK", HEX, 32),
    "digitalocean": _token("dop_v1_", HEX, 64),
    "vault": _token("hvs.", URLSAFE, 95),
    "jwt": _fmt("eyJhbGciOiJIUzI1NiJ9.eyJ{0}.{1}", (URLSAFE, 40), (URLSAFE, 43)),
    "private-key-escaped": _pem_escaped,
    "authorization-bearer": _fmt("Authorization: Bearer {0}", (URLSAFE, 40)),
    "authorization-basic": _fmt("Authorization: Basic {0}=", (B64, 31)),
    "url-credentials": _fmt("https://svc-user:{0}@pypi.internal.example/simple", (ALNUM, 18)),
    "git-x-access-token": _fmt("https://x-access-token:{0}@github.com/acme/trainer.git", (ALNUM, 36)),
    "redis-password-only": _fmt("redis://:{0}@cache:6379/0", (ALNUM, 20)),
    "mysql-p-flag": _fmt("mysql -uroot -p{0} -h db.internal runs", (ALNUM, 16)),
    "curl-user": _fmt("curl -u deploy:{0} https://artifacts.example/upload", (ALNUM, 18)),
    "docker-config-auth": _fmt('{{"auths": {{"ghcr.io": {{"auth": "{0}="}}}}}}', (B64, 43)),
    "kaggle-json-key": _fmt('{{"username": "alice", "key": "{0}"}}', (HEX, 32)),
    "wandb-login-key": _fmt('wandb.login(key="{0}")', (HEX, 40)),
    "wandb-bare-key-env": _fmt('os.environ["WANDB_API_KEY"] = "{0}"', (HEX, 40)),
    "wandb-cli-login": _fmt("wandb login --relogin {0}", (HEX, 40)),
    "hf-token-assignment": _fmt("HF_TOKEN={0}", (ALNUM, 24)),
    "api-key-flag": _fmt("--api-key {0}", (ALNUM, 24)),
    "password-assignment": _fmt("password={0}", (ALNUM, 16)),
}

POSITIONS = ("error", "source", "command", "member", "env")
PER_BUNDLE = 6  # formats planted together in one bundle (the CLI runs per bundle are what take time)

LOG = """{extra}
$ python train.py --epochs 3 --note {command}
Epoch 1/3: 100%|##########| 50/50 [00:10<00:00]
Traceback (most recent call last):
  File "/work/app/train.py", line 41, in <module>
    main()
  File "/work/app/train.py", line 37, in main
    client.push(model, {source})
  File "/work/app/train.py", line 12, in push
    torch.cuda.synchronize()
RuntimeError: CUDA error: an illegal memory access was encountered ({error})
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
"""


def _member_name(texts: list[str]) -> str:
    return "logs/run " + " ".join(texts).replace("\\", "_").replace("\n", " ") + ".log"


def _plant(bundle: Path, names: list[str], rng: random.Random) -> dict[str, dict[str, Planted]]:
    """One bundle with the formats `names`, each planted (a fresh secret each time) in every position."""
    planted = {name: {pos: CORPUS[name](rng) for pos in POSITIONS} for name in names}
    at = {pos: [planted[n][pos].text for n in names] for pos in POSITIONS}
    extra = "\n".join(p.extra for n in names for p in planted[n].values() if p.extra)
    log = LOG.format(extra=extra + "\n" + "\n".join(f"step {i}: loss 0.{i:03d}" for i in range(12)),
                     command=" ".join(at["command"]), source=", ".join(at["source"]), error="; ".join(at["error"]))
    bundle.mkdir()
    with zipfile.ZipFile(bundle / "artifacts.zip", "w") as z:
        z.writestr(_member_name(at["member"]), log)
    env = "".join(f"NOTE_{i}={t}\n" for i, t in enumerate(at["env"]))
    (bundle / "env.txt").write_text(f"PATH=/usr/local/bin:/usr/bin\nCUDA_VISIBLE_DEVICES=0\n{env}PYTHONPATH=/work/app\n",
                                    encoding="utf-8")
    return planted


def _run(args: list[str], env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    assert result.exit_code in (0, 1, 4), (args, result.exit_code, result.output)
    return result.output


def _db_text(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        return "\n".join(con.iterdump())
    finally:
        con.close()


def _outputs(b: str, work: Path) -> dict[str, str]:
    """Every output of one bundle that leaves the machine (and --redact's)."""
    out: dict[str, str] = {}
    work.mkdir(parents=True)
    out["report"] = _run(["report", b])
    out["report --url"] = _run(["report", "--url", "https://github.com/acme/trainer", b])
    out["report issue form --url"] = _run(["report", "--template", str(FORM), "--url", "https://github.com/acme/trainer", b])
    out["analyze --markdown"] = _run(["analyze", "--markdown", b])
    summary, outputs_file, junit, cq = work / "summary.md", work / "outputs.txt", work / "junit.xml", work / "cq.json"
    out["--github stdout"] = _run(["analyze", "--github", "--junit", str(junit), "--codequality", str(cq), b],
                                  env={"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs_file),
                                       "GITHUB_WORKSPACE": b, "COLUMNS": "80"})
    out["--github step summary"] = summary.read_text(encoding="utf-8")
    out["--github GITHUB_OUTPUT"] = outputs_file.read_text(encoding="utf-8")
    out["--junit"] = junit.read_text(encoding="utf-8")
    out["--codequality"] = cq.read_text(encoding="utf-8")
    out["--json --redact"] = _run(["analyze", "--json", "--redact", b])
    out["terminal --redact"] = _run(["analyze", "--redact", b], env={"COLUMNS": "80"})
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[dict[str, dict[str, Planted]], dict[str, dict[str, str]]]:
    """(format -> position -> what was planted, format -> output -> text)."""
    root = tmp_path_factory.mktemp("secrets")
    bundles = root / "bundles"
    bundles.mkdir()
    rng = random.Random(0xC0FFEE)
    names = list(CORPUS)
    groups = [names[i:i + PER_BUNDLE] for i in range(0, len(names), PER_BUNDLE)]
    planted: dict[str, dict[str, Planted]] = {}
    outputs: dict[str, dict[str, str]] = {}
    for k, group in enumerate(groups):
        bundle = bundles / f"run-{k}"
        planted.update(_plant(bundle, group, rng))
        out = _outputs(str(bundle), root / "out" / bundle.name)
        outputs.update({name: out for name in group})
    db = root / "triage.db"
    text = _run(["triage", "-j", "2", "--db", str(db), str(bundles)])
    js = _run(["triage", "-j", "2", "--json", "--db", str(db), str(bundles)])
    dump = _db_text(db)
    assert text.count("run-") >= len(groups) and dump.count("INSERT INTO \"bundles\"") == len(groups)
    for name in CORPUS:
        outputs[name] = {**outputs[name], "triage": text, "triage --json": js, "triage database": dump}
    return planted, outputs


def _decoded(text: str) -> str:
    """What a reader of the output sees: URLs and workflow-command escapes decoded."""
    return urllib.parse.unquote(urllib.parse.unquote(text)).replace("&#10;", "\n")


def _leaks(text: str, secret: str, window: int = 10) -> str | None:
    """A piece of the secret (any `window` consecutive characters, or all of a shorter one) in text."""
    w = min(window, len(secret))
    for t in (text, _decoded(text)):
        for i in range(len(secret) - w + 1):
            if secret[i:i + w] in t:
                return secret[i:i + w]
    return None


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CORPUS))
def test_no_secret_leaves_in_any_output(corpus, name: str):
    planted, outputs = corpus
    leaks = []
    for where, p in planted[name].items():
        for output, text in outputs[name].items():
            for secret in p.secrets:
                piece = _leaks(text, secret)
                if piece is not None:
                    leaks.append(f"{output}: planted in the {where}: {piece!r} of {secret!r}")
    assert not leaks, "\n".join(leaks)


def test_the_corpus_is_large_and_every_output_shows_the_crash(corpus):
    planted, outputs = corpus
    assert len(CORPUS) >= 41
    out = outputs["github-pat"]
    assert "illegal memory access" in out["report"] and "illegal memory access" in out["--github step summary"]
    assert "ghp_<redacted>" in out["report"] and "ghp_<redacted>" in out["--json --redact"]
    assert "ghp_<redacted>" in out["terminal --redact"] and "ghp_<redacted>" in out["--github stdout"]
    assert "signature=" in out["--github GITHUB_OUTPUT"]
    assert "item(s) redacted" in out["--github step summary"]
    # the member name is redacted in the JUnit file= and the Code Quality path, not dropped
    assert re.search(r'file="[^"]*artifacts\.zip!logs/run ghp_&lt;redacted&gt;', out["--junit"]), out["--junit"]
    paths = [i["location"]["path"] for i in json.loads(out["--codequality"])]
    assert any("artifacts.zip!logs/run ghp_<redacted>" in p for p in paths), paths


@pytest.mark.parametrize("name", list(CORPUS))
def test_each_format_is_recognised_alone(name: str):
    p = CORPUS[name](random.Random(7))
    text = p.extra + "\n" + p.text if p.extra else p.text
    out, counts = redact(text)
    for secret in p.secrets:
        assert _leaks(out, secret) is None, out
    assert counts, out


def test_every_format_in_the_data_compiles_and_names_its_source():
    fs = formats()
    assert len(fs) >= 41
    for f in fs:
        assert f.source, f.id
        assert f.kind in KINDS, f.id


def test_signature_message_holds_no_secret_and_a_rotated_token_keeps_the_id():
    from crashlens.model import Analysis, Evidence, Loc
    from crashlens.signature import normalise_message, signature

    def analysis(token: str) -> Analysis:
        e = Evidence("exception", f"PermissionError: push to hub failed with token {token} (403)", Loc("run.log", 9))
        return Analysis((), (), e, (), (), {}, ())

    rng = random.Random(5)
    one, two = (CORPUS["huggingface"](rng).text for _ in range(2))
    assert one[3:13] not in normalise_message(f"denied: {one}")
    assert signature(analysis(one)).id == signature(analysis(two)).id
    assert one[3:13] not in signature(analysis(one)).text
    # a token no format knows is a random token: it differs between runs
    odd = _rand(rng, ALNUM, 40)
    assert odd[:10] not in normalise_message(f"auth failed for key {odd}")


def test_redacted_analysis_keeps_types_and_unchanged_objects():
    from crashlens.model import Analysis, Evidence, Frame, Loc
    from crashlens.report.redact import redacted
    from crashlens.signature import signature

    token = CORPUS["gitlab-pat"](random.Random(9)).text
    e = Evidence("exception", f"RuntimeError: clone failed ({token})", Loc(f"a.zip!{token}.log", 3))
    keep = Evidence("exception", "nothing secret here", Loc("b.log", 1))
    a = Analysis((), (), e, (), (Frame("user", "main", "/w/x.py", 3, code=f"clone({token!r})"),), {"gpu": "H100"}, (),
                 exceptions=(e, keep))
    ra, rs, red = redacted(a, signature(a))
    assert type(ra) is Analysis and isinstance(ra.code_path, tuple) and isinstance(ra.exceptions, tuple)
    assert ra.exceptions[1] is keep and ra.environment == {"gpu": "H100"}
    assert "glpat-<redacted>" in ra.primary_error.text and "glpat-<redacted>" in ra.primary_error.loc.source
    assert "glpat-<redacted>" in ra.code_path[0].code and red.counts == {"gitlab-token": 1}
