"""Secrets out of text that leaves the machine (bug reports, Markdown, CI outputs, triage).

    redact(text, *, emails=False, home_users=False, hostnames=False, extra=()) -> (text, counts)
    Redactor(...)            several texts of one report: shared counts, learn() then redact()
    Redactor.analysis(a)     an Analysis with every string redacted (before any renderer cuts or wraps)
    Redactor.signature(sig)  a Signature with its text redacted
    formats() / near_formats()   the secret formats of data/secrets.yaml

Always redacted: the token formats of data/secrets.yaml (modelled on gitleaks' default rules:
GitHub, GitLab, Hugging Face, OpenAI, Anthropic, Slack, AWS, Google, Azure, Stripe, npm, PyPI,
Databricks, SendGrid, Twilio, …, and contexts such as `mysql -p…`, a Docker config's "auth",
kaggle.json's "key", `wandb.login(key=…)`), values that are secrets only near a context (an AWS
secret key in a report that shows its key id, a bare W&B key near a W&B line), credentials in
URLs (`redis://:pw@`), `Authorization:` headers and bearer tokens, PEM private-key blocks, and
values of secret-looking assignments (`*_TOKEN=`, `*_KEY=`, `*_SECRET=`, `password=`,
`passwd:`, CLI flags `--token X`, JSON/YAML/Python-dict keys such as `"api_key": "..."`).
Optional: e-mail addresses, user names in home paths, host names (`hostnames=True` detects them
from syslog/journald prefixes, NCCL prefixes, `host : name` and `HOSTNAME=` lines; an iterable
also names them). `extra` redacts literal strings.

Replacements keep the kind visible (`hf_<redacted>`, `AKIA<redacted>`, `API_KEY=<redacted>`,
`<email>`, `/home/<user>/`, `<host>`), never add or remove a line (file:line references stay
valid) and are idempotent: redacting redacted text changes nothing and counts nothing.
counts maps a kind (KINDS) to how many distinct items were replaced.

A neutral module: it imports only crashlens.knowledge, so the signature stage, triage and the
renderers (through report/redact.py) share it.
"""

from __future__ import annotations

import dataclasses
import re
from bisect import bisect_right
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Any, Callable, Iterable, Iterator, Mapping

from .knowledge import data

R = "<redacted>"
# a token cut short: 4+ characters before an ellipsis, or 8+ at the end of a text cut without one
STUB = r"(?:{c}){{4,}}(?=…|\.\.\.)|(?:{c}){{8,}}\Z"
MEMO_MAX_LEN = 4096  # texts up to this long are remembered (a report repeats its evidence lines)
LEARN_INPUT_BYTES = 4 << 20  # learn_inputs: the head of each text input read for contexts and host names
LEARN_TOTAL_BYTES = 32 << 20  # ... and at most this much over all inputs


# ---------------------------------------------------------------------------------------------
# the formats (data/secrets.yaml)


@dataclass(frozen=True)
class SecretFormat:
    """A token format: `prefix` is kept, `body` replaced (docs in data/secrets.yaml)."""

    id: str
    kind: str
    source: str
    keywords: tuple[str, ...]
    pattern: re.Pattern[str]  # groups pre, val
    stub: re.Pattern[str] | None  # the token cut short before … or ...


@dataclass(frozen=True)
class NearFormat:
    """A value that is a secret only near a context."""

    id: str
    kind: str
    source: str
    context: re.Pattern[str]
    value: re.Pattern[str]
    lines: int | None  # None: anywhere in the report once the context was seen
    stub: re.Pattern[str] | None = None  # the value cut short (before … or ... or at the end of a text)
    keywords: tuple[str, ...] = ()  # lower-case; one of them is in every text the context matches

    def seen_in(self, text: str, low: str | None = None) -> bool:
        low = text.lower() if low is None else low
        return (not self.keywords or any(k in low for k in self.keywords)) and self.context.search(text) is not None


class FormatError(ValueError):
    pass


@cache
def _doc() -> dict[str, Any]:
    return data("secrets.yaml")


@cache
def kinds() -> dict[str, tuple[str, str]]:
    """kind -> (singular, plural), for summaries."""
    return {str(k): (str(v[0]), str(v[1])) for k, v in (_doc().get("kinds") or {}).items()}


def _compile(fid: str, what: str, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise FormatError(f"data/secrets.yaml: {fid}: {what}: {exc}") from None


@cache
def formats() -> tuple[SecretFormat, ...]:
    out: list[SecretFormat] = []
    known = kinds()
    for f in _doc().get("formats") or ():
        fid, kind = str(f["id"]), str(f["kind"])
        if kind not in known:
            raise FormatError(f"data/secrets.yaml: {fid}: kind {kind!r} is not under kinds")
        left = f.get("left", "(?<![A-Za-z0-9])")
        right = f.get("right", "(?![A-Za-z0-9])")
        prefix = f.get("prefix", "")
        pattern = _compile(fid, "prefix/body", f"{left}(?P<pre>{prefix})(?P<val>{f['body']}){right}")
        stub = None
        if f.get("stub"):
            stub = _compile(fid, "stub", f"{left}(?P<pre>{prefix})(?P<val>{STUB.format(c=f['stub'])})")
        out.append(SecretFormat(fid, kind, str(f.get("source", "")),
                                tuple(str(k).lower() for k in f.get("keywords") or ()), pattern, stub))
    if len({f.id for f in out}) != len(out):
        raise FormatError("data/secrets.yaml: duplicate format ids")
    return tuple(out)


@cache
def _any_keyword() -> re.Pattern[str]:
    """One pattern for every keyword of every format (a cheap first test of a short text); a
    format without keywords makes it match everything."""
    fs = formats()
    if any(not f.keywords for f in fs):
        return re.compile("")
    words = sorted({k for f in fs for k in f.keywords}, key=len, reverse=True)
    return re.compile("|".join(re.escape(k) for k in words))


@cache
def near_formats() -> tuple[NearFormat, ...]:
    out = []
    for f in _doc().get("near") or ():
        fid = str(f["id"])
        lines = f.get("lines", 3)
        out.append(NearFormat(fid, str(f["kind"]), str(f.get("source", "")), _compile(fid, "context", f["context"]),
                              _compile(fid, "value", f["value"]), None if lines == "all" else int(lines),
                              _compile(fid, "stub", f["stub"]) if f.get("stub") else None,
                              tuple(str(k).lower() for k in f.get("keywords") or ())))
    return tuple(out)


# kind -> (singular, plural) for summaries
KINDS: dict[str, tuple[str, str]] = kinds()

Counts = dict[str, int]

GATE_CHARS = 1 << 16  # above this, a pattern runs only on the lines that hold one of its keywords


def _gated(text: str, keywords: Iterable[str], fn: Callable[[str], str], low: str | None = None) -> str:
    """fn(text) when one of the lower-case keywords occurs in it. A large text: fn on the lines
    that hold a keyword only (every pattern gated so is line-local), which keeps redaction of a
    large report linear in its size instead of one regex scan per format."""
    low = text.lower() if low is None else low
    if len(text) <= GATE_CHARS or len(low) != len(text):
        return fn(text) if any(k in low for k in keywords) else text
    hits: list[int] = []
    for k in keywords:
        i = low.find(k)
        while i != -1:
            hits.append(i)
            i = low.find(k, i + 1)
    if not hits:
        return text
    out: list[str] = []
    pos = 0
    for i in sorted(hits):
        if i < pos:
            continue
        start = text.rfind("\n", 0, i) + 1
        end = text.find("\n", i)
        end = len(text) if end == -1 else end
        out.append(text[pos:start])
        out.append(fn(text[start:end]))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _placeholder(value: str) -> bool:
    """A value that is already a placeholder, a variable reference or plainly not a secret."""
    v = value.strip().strip("\"'")
    if not v or "<" in v or ">" in v:
        return True
    low = v.lower()
    if low in ("none", "null", "nil", "true", "false", "yes", "no", "undefined", "unset", "empty", "redacted",
               "required", "optional", "not set", "n/a", "changeme", "string", "str", "xxx", "***"):
        return True
    if set(v) <= set("*xX.•-_#?"):
        return True
    if v[0] in "$%{[(@" or v.startswith(("os.environ", "os.getenv", "getenv", "env.", "secrets.", "process.env")):
        return True  # $VAR, %VAR%, ${{ secrets.X }}, [list], (expr), @file
    if v.startswith(("/", "~/", "./", "../")) or re.fullmatch(r"[\w.\-/]+\.(?:pem|key|pub|crt|cer|json|txt|ya?ml|"
                                                              r"p12|pfx|gpg|asc|env|cfg|ini|toml)", v):
        return True  # a file that holds the secret, not the secret
    if "(" in v or "[" in v:
        return True  # code: token=get_token(), key=keys[0]
    if re.fullmatch(r"(?:self|cls|args|opts|options|config|cfg|settings|kwargs)\.[\w.]+", v):
        return True  # code: token=self.token
    return False


# ---------------------------------------------------------------------------------------------
# names of secret-looking assignments

_ALWAYS_PARTS = {"secret", "password", "passwd", "pwd", "passphrase", "apikey", "secretkey", "accesskey",
                 "credential", "credentials", "privatekey", "authtoken", "accesstoken"}
_KEY_PREFIXES = {"api", "access", "secret", "private", "auth", "client", "service", "account", "encryption",
                 "signing", "master", "license", "app", "subscription", "wandb", "hf", "openai", "anthropic",
                 "aws", "azure", "gcp", "google", "github", "gitlab", "slack", "comet", "neptune", "hub",
                 "huggingface", "deepseek", "mistral", "cohere", "groq", "together", "replicate", "pinecone",
                 "ssh", "gpg", "pgp", "storage", "bucket", "s3", "minio", "db", "database", "redis", "jwt", "session",
                 "webhook", "bot", "user", "admin", "root", "write", "read"}
_TOKEN_NOT_SECRET = {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "start", "end", "special", "additional",
                     "decoder", "image", "video", "audio", "num", "max", "min", "first", "last", "next", "prev",
                     "input", "output", "new", "total", "per", "vision", "boi", "eoi", "eot", "sot", "think",
                     "tool", "system", "prefix", "suffix", "middle", "fim", "chat", "default", "stop", "bad"}


def _name_kind(name: str, *, colon: bool) -> str | None:
    """The kind of a secret-looking assignment name, or None when the name is not one."""
    raw = name.strip("-\"'")
    parts = [p for p in re.split(r"[_.\-]+", raw.lower()) if p]
    if not parts:
        return None
    low = "_".join(parts)
    last = parts[-1]
    env_style = raw.isupper() and len(parts) > 1
    kind = "wandb-key" if "wandb" in parts else "aws-secret" if low.startswith(("aws_secret", "secret_access_key")) \
        else "secret"
    if last in _ALWAYS_PARTS or (last == "key" and len(parts) > 1 and parts[-2] in ("secret", "access", "private")
                                 and (len(parts) == 2 or parts[-3] not in ("public",))):
        return kind
    if last == "token":
        if len(parts) == 1:
            return None if colon else kind  # `token: expired` is prose; `token=abc` an assignment
        if env_style or parts[-2] not in _TOKEN_NOT_SECRET:
            return kind
        return None
    if last == "key" and len(parts) > 1:
        if env_style or parts[-2] in _KEY_PREFIXES:
            return kind
        return None
    if last == "pass" and len(parts) > 1 and parts[-2] in ("db", "user", "admin", "root", "smtp", "mysql", "pg"):
        return kind
    return None


# ---------------------------------------------------------------------------------------------
# patterns

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----")
_PEM_ESCAPED_BODY = re.compile(r"(?:\\r)?\\n(?:\\[rn]|[A-Za-z0-9+/=])+")
_PEM_BODY_LINE = re.compile(r"^[\s\"',]*(?:[A-Za-z0-9+/=]{8,}|Proc-Type:.*|DEK-Info:.*|Comment:.*|<redacted>|)[\s\"',\\n]*$")

_AUTH = re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
                   r"(?:(bearer|basic|token|digest|negotiate|apikey|api-key|bot)(\s+))?([^\s\"',;]+)")
_BEARER = re.compile(r"\b([Bb]earer|BEARER)(\s+)([A-Za-z0-9._~+/\-]{16,}=*)")
_NETRC = re.compile(r"\b(machine\s+\S+\s+login\s+\S+\s+password\s+)(\S+)")

_URL_CRED = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://)([^\s:/@<>\"'`]*):([^\s@/<>\"'`]+)@")
_BARE_CRED = re.compile(r"(?<![\w/:])(x-access-token|oauth2|gitlab-ci-token|x-token-auth|token):([^\s@/<>\"'`]+)@")

# NAME=value, NAME: value, "name": "value", 'name': 'value', export NAME="value"
_SECRET_END = r"(?i:token|secret|passw(?:or)?d|pwd|pass|passphrase|key|credentials?)"
_ASSIGN = re.compile(r"""(?P<pre>(?<![\w.\-/])(?P<q>["']?)(?P<name>(?:[A-Za-z_][A-Za-z0-9_.\-]*?)?""" + _SECRET_END + r""")(?P=q)
                         (?P<sep>[ \t]*(?::|=|=>|\s:=)[ \t]*))
                         (?P<val>"[^"\n]*"|'[^'\n]*'|[^\s"'`|,;&}\])]+)""", re.X)
_ASSIGN_KEYWORDS = ("token", "secret", "pass", "pwd", "key", "credential")
# a cheap first test for _ASSIGN (which starts with a look-behind, so the regex engine tries it everywhere)
_ASSIGN_HINT = re.compile(r"(?i)(?:token|secret|pass|pwd|key|credential)[\w.\-]*[\"']?[ \t]*(?::|=)")
_FLAG = re.compile(r"""(?P<pre>(?<![\w\-])--(?P<name>(?:[A-Za-z][A-Za-z0-9_.\-]*?)?""" + _SECRET_END + r""")(?P<sep>=|[ \t]+))
                       (?P<val>"[^"\n]*"|'[^'\n]*'|[^\s"'`|\-][^\s"'`|]*)""", re.X)

_EMAIL = re.compile(r"(?<![\w.+\-])([A-Za-z0-9._%+\-]+)@((?:[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,})\b")
_HOME = re.compile(r"(/home/|/Users/|/export/home/|/var/home/)([^/\s<>\"':;,]+)(?=[/\s\"':;,]|$)", re.M)
_WINHOME = re.compile(r"(\b[A-Za-z]:(?:\\\\|\\|/)(?:Users|Documents and Settings)(?:\\\\|\\|/))([^\\/\s<>\"':;,]+)")
_USERVAR = re.compile(r"(?m)^(\s*(?:export\s+)?(?:USER|LOGNAME|USERNAME|SUDO_USER)\s*=\s*)([A-Za-z0-9._\-]+)")
_NOT_USERS = {"shared", "public", "default", "all users", "default user", "<user>", "user", "username"}

_HOST_SOURCES = (
    # syslog / journald short: "Nov 20 03:02:11 gpu-node-07 kernel: ..."
    re.compile(r"(?m)^(?:<\d+>)?[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? ([A-Za-z0-9][A-Za-z0-9.\-]*) "
               r"[\w.@/()\-]+(?:\[\d+\])?: "),
    # journald short-iso / RFC 5424: "2026-11-20T03:02:11+0000 gpu-node-07 kernel: ..."
    re.compile(r"(?m)^(?:<\d+>1? )?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) "
               r"([A-Za-z0-9][A-Za-z0-9.\-]*) [\w.@/()\-]+(?:\[\d+\])?: "),
    # torchrun's failure summary and similar key : value blocks
    re.compile(r"(?mi)^[ \t]*(?:host|hostname|node|nodename|node name)[ \t]*:[ \t]*([A-Za-z0-9][A-Za-z0-9.\-]*)[ \t]*$"),
    re.compile(r"(?m)^[ \t]*(?:export[ \t]+)?(?:HOSTNAME|HOST|SLURMD_NODENAME)=([A-Za-z0-9][A-Za-z0-9.\-]*)[ \t]*$"),
    # NCCL: "gpu-node-07:48211:48211 [0] NCCL INFO ..."
    re.compile(r"(?m)^([A-Za-z][A-Za-z0-9.\-]*):\d+:\d+ \[\d+\] NCCL "),
)
_NOT_HOSTS = {"localhost", "localhost.localdomain", "kernel", "unknown", "none", "null", "host", "hostname",
              "ubuntu", "debian", "linux", "systemd", "0.0.0.0", "127.0.0.1"}


class Redactor:
    """Redaction over several texts (the fields of one report): counts are of distinct items
    (a token that appears five times is one token); host names and the contexts of `near`
    formats seen in one text count for every later one (learn() them first from all texts;
    analysis() does)."""

    def __init__(self, *, emails: bool = False, home_users: bool = False, hostnames: bool | Iterable[str] = False,
                 extra: Iterable[str] = ()) -> None:
        self.seen: dict[str, set[str]] = {}
        self._by_head: dict[tuple[str, str], set[str]] = {}
        self.options_emails = emails
        self.options_home = home_users
        self.options_hosts = bool(hostnames)
        self.hosts: set[str] = set() if isinstance(hostnames, bool) else {h for h in hostnames if h}
        self.extra_strings = [s for s in extra if s and s.strip()]
        self.contexts: set[str] = set()  # ids of report-wide near formats whose context was seen
        self._memo: dict[str, str] = {}
        self._learnt: set[str | None] = set()  # inputs learn_inputs() has read

    @property
    def counts(self) -> Counts:
        return {k: len(v) for k, v in self.seen.items() if v}

    def add(self, kind: str, value: str = "") -> None:
        seen = self.seen.setdefault(kind, set())
        if len(value) >= 8:  # a value cut short by a renderer and the whole value are one item
            same = self._by_head.setdefault((kind, value[:8]), set())  # both share their first 8 characters
            for other in list(same):
                if other.startswith(value) or value.startswith(other):
                    if len(value) > len(other):
                        seen.discard(other)
                        same.discard(other)
                        seen.add(value)
                        same.add(value)
                    return
            same.add(value)
        seen.add(value)

    def learn(self, text: str) -> None:
        """Before redacting: host names (syslog prefixes, `host : name` lines) and the contexts of
        report-wide near formats (an AWS access key id) in a text."""
        if not text:
            return
        before = (len(self.hosts), len(self.contexts))
        if self.options_hosts:
            self.hosts |= _detect_hosts(text)
        low = text.lower()
        for f in near_formats():
            if f.lines is None and f.id not in self.contexts and f.seen_in(text, low):
                self.contexts.add(f.id)
        if (len(self.hosts), len(self.contexts)) != before:
            self._memo.clear()

    def learn_inputs(self, inputs: Iterable[Any]) -> None:
        """learn() from the head of every text input (InputFile): an AWS access key id far above
        its secret, host names in prefixes that the analysis strips. Reads at most
        LEARN_INPUT_BYTES of each input and LEARN_TOTAL_BYTES in all; each input once."""
        sticky = {f.id for f in near_formats() if f.lines is None}
        budget = LEARN_TOTAL_BYTES
        for inp in inputs:
            if budget <= 0 or (not self.options_hosts and sticky <= self.contexts):
                return
            name = getattr(inp, "name", None)
            if getattr(inp, "kind", None) != "text" or name in self._learnt:
                continue
            self._learnt.add(name)
            try:
                with inp.open() as f:
                    head = f.read(min(LEARN_INPUT_BYTES, budget))
            except (OSError, ValueError, EOFError):
                continue
            budget -= len(head)
            self.learn(head.decode("utf-8", "replace") if isinstance(head, bytes) else str(head))

    def __call__(self, text: str) -> str:
        return self.redact(text)

    def redact(self, text: str) -> str:
        if not text:
            return text
        memo = len(text) <= MEMO_MAX_LEN
        if memo:
            done = self._memo.get(text)
            if done is not None:
                return done
        original = text
        self.learn(text)
        near = self._near_lines(text)
        if self.extra_strings:
            text = self.extra(text, self.extra_strings)
        text = self.pem(text)
        text = self.auth(text)
        text = self.tokens(text)
        text = self.urls(text)
        text = self.assignments(text)
        text = self.near(text, near)
        if self.options_emails:
            text = self.emails(text)
        if self.options_home:
            text = self.home_users(text)
        if self.options_hosts:
            self.learn(text)
            text = self.hostnames(text, self.hosts)
        if memo and len(self._memo) < 100_000:
            self._memo[original] = text
        return text

    def deep(self, value: Any) -> Any:
        """Every string inside dicts/lists/tuples redacted (a template context); containers are
        rebuilt, keys are kept."""
        if isinstance(value, str) and not isinstance(value, Enum):
            return self.redact(value)
        if isinstance(value, Mapping):
            return {k: self.deep(v) for k, v in value.items()}
        if isinstance(value, tuple):
            return tuple(self.deep(v) for v in value)
        if isinstance(value, list):
            return [self.deep(v) for v in value]
        return value

    def analysis(self, a: Any) -> Any:
        """A copy of an Analysis (any frozen dataclass) with every string in it redacted: what a
        renderer then cuts, wraps or shortens holds no secret. Contexts are learnt from every
        string first (an AWS key id in the command line makes a secret in the error line one)."""
        self.learn("\n".join(strings_in(a)))
        return self._walk(a)

    def signature(self, sig: Any) -> Any:
        """A Signature (id, text, parts) with its text and parts redacted; the id is kept."""
        return dataclasses.replace(sig, text=self.redact(sig.text), parts=self.deep(dict(sig.parts)))

    def _walk(self, value: Any) -> Any:
        """Like deep(), but keeps types: dataclasses are replaced field by field, unchanged
        objects are returned as they are."""
        if isinstance(value, str):
            if isinstance(value, Enum):
                return value
            new = self.redact(value)
            return value if new == value else new
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {}
            for f in dataclasses.fields(value):
                if not f.init:
                    continue
                old = getattr(value, f.name)
                if callable(old) and not dataclasses.is_dataclass(old):
                    continue
                new = self._walk(old)
                if new is not old:
                    changes[f.name] = new
            return dataclasses.replace(value, **changes) if changes else value
        if isinstance(value, Mapping):
            items = {k: self._walk(v) for k, v in value.items()}
            return value if all(items[k] is v for k, v in value.items()) else items
        if isinstance(value, (tuple, list)):
            new_items = [self._walk(v) for v in value]
            if all(n is o for n, o in zip(new_items, value)):
                return value
            return type(value)(new_items) if type(value) in (tuple, list) else tuple(new_items)
        return value

    def summary(self) -> str:
        return summary(self.counts)

    # --- multi-line private keys -----------------------------------------------------------
    def pem(self, text: str) -> str:
        if "PRIVATE KEY" not in text:
            return text
        out: list[str] = []
        pos = 0
        for m in _PEM_BEGIN.finditer(text):
            if m.start() < pos:
                continue
            end_re = re.compile(r"-----END " + re.escape(m.group(1)) + r"PRIVATE KEY(?: BLOCK)?-----")
            e = end_re.search(text, m.end(), m.end() + 100_000)
            escaped = _PEM_ESCAPED_BODY.match(text, m.end()) if e is None else None
            if e is not None:
                body_end, resume = e.start(), e.start()
            elif escaped is not None:  # one line with escaped newlines, cut off before its END line
                body_end = resume = escaped.end()
            else:  # cut off (a truncated log): the base64 lines that follow
                body_end = m.end()
                for line in re.finditer(r"[^\n]*(?:\n|$)", text[m.end():]):
                    seg = line.group(0)
                    if not seg:
                        break
                    if body_end > m.end() and not _PEM_BODY_LINE.match(seg.rstrip("\n")):
                        break
                    if body_end == m.end() and seg.strip() and not _PEM_BODY_LINE.match(seg.rstrip("\n")):
                        break
                    body_end = m.end() + line.end()
                resume = body_end
            body = text[m.end():body_end]
            new = self._pem_body(body)
            out.append(text[pos:m.end()])
            out.append(new)
            if new != body:
                self.add("private-key", re.sub(r"(?:\\[rn]|\s|[\"',])+", "", body))
            pos = resume
        out.append(text[pos:])
        return "".join(out)

    @staticmethod
    def _pem_body(body: str) -> str:
        if "\n" not in body:
            # one line with escaped newlines (a JSON service-account file): keep the escapes at the edges
            m = re.fullmatch(r"((?:\\r)?(?:\\n)?)(.*?)((?:\\r)?(?:\\n)?)", body, re.S)
            if m is None or not m.group(2).strip() or m.group(2) == R:
                return body
            return m.group(1) + R + m.group(3)
        lines = body.split("\n")
        new_lines = []
        for i, line in enumerate(lines):
            m = re.fullmatch(r"(\s*)(.*?)(\s*)", line, re.S)
            assert m is not None
            content = m.group(2)
            if not content or content == R:
                new_lines.append(line)
            elif i == 0 or i == len(lines) - 1:
                # the rest of the BEGIN line or the indentation before END: only base64 is redacted
                new_lines.append(line if not re.search(r"[A-Za-z0-9+/=]{8,}", content) else m.group(1) + R + m.group(3))
            else:
                new_lines.append(m.group(1) + R + m.group(3))
        return "\n".join(new_lines)

    # --- headers, tokens, URLs ---------------------------------------------------------------
    def auth(self, text: str) -> str:
        def header(m: re.Match[str]) -> str:
            value = m.group(4)
            scheme = m.group(2)
            if _placeholder(value) or len(value) < 8 or not (scheme or re.search(r"\d", value) or len(value) >= 16):
                return m.group(0)
            self.add("auth-header", value)
            return m.group(1) + (scheme + m.group(3) if scheme else "") + R

        def bearer(m: re.Match[str]) -> str:
            if not re.search(r"\d", m.group(3)):
                return m.group(0)
            self.add("auth-header", m.group(3))
            return m.group(1) + m.group(2) + R

        text = _gated(text, ("authorization",), lambda t: _AUTH.sub(header, t))
        text = _gated(text, ("bearer",), lambda t: _BEARER.sub(bearer, t))
        return text

    def tokens(self, text: str) -> str:
        """The token formats of data/secrets.yaml (and tokens cut short: `glpat-AbCd…`), `.netrc`
        passwords."""
        low = text.lower()
        if len(text) <= GATE_CHARS and not _any_keyword().search(low):
            return text if "machine" not in text else self._netrc(text)
        for f in formats():
            if f.keywords and not any(k in low for k in f.keywords):
                continue

            def repl(m: re.Match[str], f: SecretFormat = f) -> str:
                val = m.group("val")
                if val == R or val.startswith("<"):
                    return m.group(0)
                self.add(f.kind, m.group("pre") + val)
                return m.group("pre") + R

            def sub(t: str, f: SecretFormat = f, repl: Callable[[re.Match[str]], str] = repl) -> str:
                t = f.pattern.sub(repl, t)
                return f.stub.sub(repl, t) if f.stub is not None else t

            new = _gated(text, f.keywords, sub, low) if f.keywords else sub(text)
            if new != text:
                text, low = new, new.lower()
        return self._netrc(text) if "machine" in text else text

    def _netrc(self, text: str) -> str:
        def netrc(m: re.Match[str]) -> str:
            if _placeholder(m.group(2)):
                return m.group(0)
            self.add("wandb-key" if "wandb" in m.group(1) else "secret", m.group(2))
            return m.group(1) + R

        return _NETRC.sub(netrc, text)

    def _near_lines(self, text: str) -> dict[str, list[int] | None]:
        """For each near format whose context is in this text (or was seen in the report): the
        lines of the context (None: the whole text)."""
        out: dict[str, list[int] | None] = {}
        newlines: list[int] | None = None
        low = text.lower()
        for f in near_formats():
            if f.lines is None:
                if f.id in self.contexts:
                    out[f.id] = None
                continue
            if f.keywords and not any(k in low for k in f.keywords):
                continue
            hits = [m.start() for m in f.context.finditer(text)]
            if not hits:
                continue
            if "\n" not in text:
                out[f.id] = [0]
                continue
            if newlines is None:
                newlines = [i for i, c in enumerate(text) if c == "\n"] if len(text) < 1 << 16 else \
                    [m.start() for m in re.finditer("\n", text)]
            out[f.id] = sorted({bisect_right(newlines, h - 1) for h in hits})
        return out

    def near(self, text: str, where: Mapping[str, list[int] | None]) -> str:
        """Values of near formats (a 40-character AWS secret key, a bare W&B key) near their context."""
        if not where:
            return text
        for f in near_formats():
            if f.id not in where:
                continue

            def repl(m: re.Match[str], f: NearFormat = f) -> str:
                self.add(f.kind, m.group(0))
                return R

            def sub(t: str, f: NearFormat = f, repl: Callable[[re.Match[str]], str] = repl) -> str:
                t = f.value.sub(repl, t)
                return f.stub.sub(repl, t) if f.stub is not None else t

            at = where[f.id]
            if at is None:
                text = sub(text)
                continue
            lines = text.split("\n")
            span = f.lines or 0
            for j in sorted({j for i in at for j in range(max(0, i - span), min(len(lines), i + span + 1))}):
                lines[j] = sub(lines[j])
            text = "\n".join(lines)
        return text

    def urls(self, text: str) -> str:
        def cred(m: re.Match[str]) -> str:
            user, password = m.group(2), m.group(3)
            if _placeholder(password) or password.isdigit():
                return m.group(0)
            self.add("github-token" if user == "x-access-token" else "url-credential", password)
            return f"{m.group(1)}{user}:{R}@"

        def bare(m: re.Match[str]) -> str:
            if _placeholder(m.group(2)):
                return m.group(0)
            self.add("github-token" if m.group(1) == "x-access-token" else "url-credential", m.group(2))
            return f"{m.group(1)}:{R}@"

        if "@" in text:
            text = _URL_CRED.sub(cred, text)
            text = _BARE_CRED.sub(bare, text)
        return text

    # --- assignments -----------------------------------------------------------------------
    def assignments(self, text: str) -> str:
        def value_repl(m: re.Match[str], kind: str | None) -> str:
            val = m.group("val")
            if kind is None or _placeholder(val):
                return m.group(0)
            inner = val[1:-1] if val[:1] in "\"'" and val[-1:] == val[:1] and len(val) > 1 else val
            if inner.lower() == m.group("name").lower().strip("-"):
                return m.group(0)
            self.add(kind, inner)
            new = val[0] + R + val[-1] if inner is not val else R
            return m.group("pre") + new

        def assign(m: re.Match[str]) -> str:
            sep = m.group("sep").strip()
            colon = sep == ":"
            name = m.group("name")
            if colon and not m.group("q") and not re.search(r"[_.\-]", name) and \
                    name.lower() not in ("password", "passwd", "secret", "passphrase", "pwd"):
                return m.group(0)  # `Token: ...` / `Key: ...` in prose
            return value_repl(m, _name_kind(name, colon=colon))

        def flag(m: re.Match[str]) -> str:
            return value_repl(m, _name_kind(m.group("name"), colon=False))

        text = _gated(text, _ASSIGN_KEYWORDS, lambda t: _ASSIGN.sub(assign, t) if _ASSIGN_HINT.search(t) else t)
        if "--" in text:
            text = _gated(text, _ASSIGN_KEYWORDS, lambda t: _FLAG.sub(flag, t) if "--" in t else t)
        return text

    # --- optional: personal data -----------------------------------------------------------
    def emails(self, text: str) -> str:
        def repl(m: re.Match[str]) -> str:
            if m.group(1).lower() in ("git", "noreply") or m.group(2).lower().endswith((".py", ".so", ".cu", ".h")):
                return m.group(0)
            self.add("email", m.group(0).lower())
            return "<email>"

        return _EMAIL.sub(repl, text) if "@" in text else text

    def home_users(self, text: str) -> str:
        def repl(m: re.Match[str]) -> str:
            if m.group(2).lower() in _NOT_USERS or "<" in m.group(2):
                return m.group(0)
            self.add("home-user", m.group(2))
            return m.group(1) + "<user>"

        text = _HOME.sub(repl, text)
        text = _WINHOME.sub(repl, text)
        return _USERVAR.sub(repl, text)

    def hostnames(self, text: str, names: Iterable[str]) -> str:
        found = {n for n in names if n}
        # a fully qualified name also stands for its first label ("node7.cluster" -> "node7")
        for h in list(found):
            if "." in h and not re.fullmatch(r"[\d.]+", h):
                short = h.split(".", 1)[0]
                if len(short) >= 3 and short.lower() not in _NOT_HOSTS:
                    found.add(short)
        for h in sorted(found, key=len, reverse=True):
            if h not in text:
                continue
            pattern = re.compile(r"(?<![\w\-.<])" + re.escape(h) + r"(?![\w\-]|\.[A-Za-z0-9])")

            def repl(m: re.Match[str], h: str = h) -> str:
                self.add("hostname", h.split(".", 1)[0].lower())
                return "<host>"

            text = pattern.sub(repl, text)
        return text

    def extra(self, text: str, strings: Iterable[str]) -> str:
        for s in sorted({s for s in strings if s and s.strip()}, key=len, reverse=True):
            if s in text:
                self.add("custom", s)
                text = text.replace(s, R)
        return text


def strings_in(value: Any) -> Iterator[str]:
    """Every string inside a dataclass, mapping or sequence (callables and enums skipped)."""
    if isinstance(value, str):
        if not isinstance(value, Enum):
            yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if not (callable(v) and not dataclasses.is_dataclass(v)):
                yield from strings_in(v)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from strings_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings_in(v)


def _detect_hosts(text: str) -> set[str]:
    found: set[str] = set()
    for pattern in _HOST_SOURCES:
        for m in pattern.finditer(text):
            h = m.group(1).rstrip(".")
            if len(h) >= 3 and h.lower() not in _NOT_HOSTS and not re.fullmatch(r"[\d.]+", h) and "<" not in h:
                found.add(h)
    return found


def redact(text: str, *, emails: bool = False, home_users: bool = False, hostnames: bool | Iterable[str] = False,
           extra: Iterable[str] = ()) -> tuple[str, Counts]:
    """Redact secrets (and optionally personal data) from text: (redacted text, counts of the
    distinct items redacted, per kind)."""
    r = Redactor(emails=emails, home_users=home_users, hostnames=hostnames, extra=extra)
    r.learn(text)
    return r.redact(text), r.counts


def summary(counts: Mapping[str, int]) -> str:
    """`crashlens redacted 3 items: 2 hf tokens, 1 e-mail` (or `… redacted no items`)."""
    total = sum(counts.values())
    if not total:
        return "crashlens redacted no items (no secrets found)"
    order = list(KINDS)
    parts = []
    for kind in sorted(counts, key=lambda k: (-counts[k], order.index(k) if k in order else 99)):
        n = counts[kind]
        if n:
            one, many = KINDS.get(kind, (kind, kind + "s"))
            parts.append(f"{n} {one if n == 1 else many}")
    return f"crashlens redacted {total} item{'s' if total != 1 else ''}: {', '.join(parts)}"


def shareable(text: str, redact_on: bool = True, **options) -> str:
    """Text about to leave the machine (`analyze --markdown`, a CI summary): redacted, with a
    closing line that says how many items were redacted. redact_on=False returns it as is."""
    if not redact_on:
        return text
    new, counts = redact(text, **options)
    return new.rstrip("\n") + "\n\n" + summary(counts)
