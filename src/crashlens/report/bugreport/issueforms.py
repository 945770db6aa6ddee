"""GitHub issue forms (.github/ISSUE_TEMPLATE/*.yml): load one, fill its fields from the bug-report
context, and write the issue body GitHub makes from a submitted form.

    IssueForm.load(path) / IssueForm.parse(doc, name)
    fill_form(form, ctx) -> fields        by id, then label, then type; the rest into "additional context"
    form_body(fields) -> str              `### Label`, a blank line, the value
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .markup import fence
from .templates import TemplateError, section

@dataclass
class FormField:
    type: str
    id: str | None
    label: str
    value: str = ""  # the filled value (plain; GitHub renders `render:` fields as code blocks)
    options: list[str] = field(default_factory=list)
    checked: list[bool] = field(default_factory=list)
    render: str | None = None
    filled_from: str | None = None  # which context section filled it
    default: str = ""


@dataclass
class IssueForm:
    name: str  # the file name, for the template= query parameter
    title: str  # the form's title prefix ("[Bug]: ")
    labels: list[str]
    fields: list[FormField]

    @staticmethod
    def load(path: Path) -> "IssueForm":
        import yaml

        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"{path}: could not be read: {exc}") from None
        except yaml.YAMLError as exc:
            raise TemplateError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
        return IssueForm.parse(doc, path.name)

    @staticmethod
    def parse(doc: Any, name: str) -> "IssueForm":
        if not isinstance(doc, dict) or not isinstance(doc.get("body"), list):
            raise TemplateError(f"{name}: not a GitHub issue form (no `body:` list of fields)")
        fields = []
        for i, item in enumerate(doc["body"]):
            if not isinstance(item, dict) or "type" not in item:
                raise TemplateError(f"{name}: body item {i + 1} has no `type`")
            attrs = item.get("attributes") or {}
            if not isinstance(attrs, dict):
                raise TemplateError(f"{name}: body item {i + 1}: `attributes` is not a mapping")
            t = str(item["type"])
            if t not in ("markdown", "textarea", "input", "dropdown", "checkboxes"):
                raise TemplateError(f"{name}: body item {i + 1}: unknown type {t!r}")
            opts = attrs.get("options") or []
            labels = [str(o.get("label", "")) if isinstance(o, dict) else str(o) for o in opts]
            f = FormField(t, str(item["id"]) if item.get("id") is not None else None,
                          str(attrs.get("label") or ""), options=labels, render=attrs.get("render"),
                          default=str(attrs.get("value") or "") if t != "markdown" else "")
            f.value = f.default
            f.checked = [False] * len(labels) if t == "checkboxes" else []
            if t != "markdown" and not f.label:
                raise TemplateError(f"{name}: body item {i + 1} ({t}) has no attributes.label")
            fields.append(f)
        labels = doc.get("labels") or []
        if isinstance(labels, str):
            labels = [s.strip() for s in labels.split(",") if s.strip()]
        return IssueForm(name, str(doc.get("title") or ""), [str(x) for x in labels], fields)


# (section, pattern over "id label" words) in order: the first that matches fills the field
_TEXT_MAP: tuple[tuple[str, str], ...] = (
    ("expected", r"\bexpect"),
    ("actual", r"\bactual\b|current behaviou?r|observed|\binstead\b"),
    ("steps", r"\brepro|\bsteps?\b|how to|\bminimal\b|code sample|\bsnippet|\bcommand"),
    ("logs", r"\blogs?\b|\berrors?\b|traceback|stack ?trace|backtrace|\boutput\b|crash ?report|\bmessages?\b|\bdump\b"),
    ("solution", r"\bfix|solution|workaround|proposal|proposed|suggest|alternatives?|remed"),
    ("root_cause", r"root ?cause|\bcause\b|analysis|diagnos"),
    ("testing", r"\btest"),
    ("environment", r"environment|\benv\b|versions?|system|platform|setup|collect ?env|configuration|install|hardware"),
    ("context", r"additional|context|anything else|\bother\b|\bnotes?\b|comments?|\bextra\b"),
    ("summary", r"descri|summary|\bbug\b|problem|\bissue\b|what happened|what went wrong|overview|details?|title"),
)
_INPUT_MAP: tuple[tuple[str, str], ...] = (
    ("command", r"\bcommand"),
    ("cudnn", r"cudnn"),
    ("cuda", r"\bcuda\b"),
    ("driver", r"driver"),
    ("framework", r"torch|tensorflow|\btf\b|\bjax\b|framework|paddle|mxnet"),
    ("python", r"python"),
    ("gpu", r"\bgpus?\b|graphics|accelerator|\bdevice\b|hardware"),
    ("cpu", r"\bcpu\b|processor"),
    ("os", r"\bos\b|operating system|distro|platform"),
    ("title", r"summary|title|short description|one line|descri"),
)


def _words(f: FormField) -> str:
    return re.sub(r"[_\-/]+", " ", f"{f.id or ''} {f.label}".lower())


def _input_value(key: str, ctx: Mapping[str, Any]) -> str:
    env = ctx["env"]
    if key == "command":
        return ctx["command"]["text"] if ctx.get("command") else ""
    if key == "cuda":
        v = env.get("cuda_runtime") or env.get("cuda_toolkit")
        return f"{v}" + (f" (driver supports {env['cuda_driver']})" if env.get("cuda_driver") else "") if v else \
            (f"driver supports {env['cuda_driver']}" if env.get("cuda_driver") else "")
    if key == "title":
        return ctx["title"]
    return str({"cudnn": env.get("cudnn"), "driver": env.get("driver"), "framework": env.get("framework"),
                "python": env.get("python"), "gpu": ", ".join(env.get("gpus") or []) or None, "cpu": env.get("cpu_model"),
                "os": env.get("os")}.get(key) or "")


_OS_WORDS = {"linux": ("linux", "ubuntu", "debian", "centos", "rhel", "red hat", "rocky", "alma", "fedora", "suse",
                       "arch", "amazon linux", "wsl"),
             "windows": ("windows", "win32", "win64"), "macos": ("macos", "darwin", "mac os", "os x")}


def _pick_option(f: FormField, ctx: Mapping[str, Any]) -> str | None:
    """A dropdown option that matches the analysis, or None to leave it to the reporter."""
    words = _words(f)
    if re.search(r"\bos\b|operating system|platform", words):
        os_text = (ctx["env"].get("os") or "").lower()
        for opt in f.options:
            o = opt.lower()
            for family, keys in _OS_WORDS.items():
                if (family in o or any(k in o for k in keys)) and any(k in os_text for k in keys):
                    return opt
        return None
    if re.search(r"version", words):
        have = " ".join(str(v) for v in ctx["env"].get("frameworks", {}).values())
        for opt in f.options:
            m = re.match(r"v?(\d+\.\d+(?:\.\d+)?)", opt.strip())
            if m and re.search(r"(?<![\d.])" + re.escape(m.group(1)) + r"(?![\d])", have):
                return opt
        return None
    top = ctx.get("top") or {}
    hay = " ".join([str(top.get("category", "")), str(top.get("title", "")),
                    str((ctx.get("primary") or {}).get("text", "")), " ".join(ctx["env"].get("frameworks", {})),
                    "crash bug error"]).lower()
    hay_words = set(re.findall(r"[a-z0-9]+", hay.replace("-", " ")))
    scored = []
    for opt in f.options:
        ow = {w for w in re.findall(r"[a-z0-9]+", opt.lower()) if len(w) >= 3 or w in ("gpu", "os", "oom")}
        scored.append((len(ow & hay_words), opt))
    best = max((s for s, _ in scored), default=0)
    winners = [o for s, o in scored if s == best]
    return winners[0] if best > 0 and len(winners) == 1 else None


def fill_form(form: IssueForm, ctx: Mapping[str, Any]) -> list[FormField]:
    """Fill every field of the form from the context (by id, then label, then type)."""
    cache: dict[str, str] = {}

    def sec(name: str) -> str:
        if name not in cache:
            cache[name] = section(name, ctx)
        return cache[name]

    for f in form.fields:
        words = _words(f)
        if f.type == "textarea":
            key = next((k for k, p in _TEXT_MAP if re.search(p, words)), None)
            if key is None:
                continue
            if f.render:  # GitHub shows it as a code block: plain text only
                key = {"logs": "logs_plain", "steps": "command_plain", "environment": "environment_plain"}.get(key, key)
                if key == "command_plain" and not ctx.get("command"):
                    key = "steps"
            elif key == "logs":
                key = "errors"
            value = sec(key)
            if key == "root_cause" and ctx.get("code_path_line"):
                value += "\n\n**Code path**\n\n" + sec("code_path")
            if value.strip():
                f.value, f.filled_from = value, key
        elif f.type == "input":
            key = next((k for k, p in _INPUT_MAP if re.search(p, words)), None)
            if key:
                v = _input_value(key, ctx)
                if v:
                    f.value, f.filled_from = v, key
        elif f.type == "dropdown":
            opt = _pick_option(f, ctx)
            if opt is not None:
                f.value, f.filled_from = opt, "dropdown"
    # what the form has no field for goes to its "additional context" field
    filled = {f.filled_from for f in form.fields}
    extra = [(k, h) for k, h in (("testing", "Testing"), ("solution", "Proposed solution")) if k not in filled]
    ctx_field = next((f for f in form.fields if f.filled_from == "context"), None)
    if ctx_field is not None:
        for k, heading in extra:
            ctx_field.value += f"\n\n**{heading}**\n\n" + sec(k)
    return form.fields


def form_body(fields: Sequence[FormField]) -> str:
    """The issue body GitHub creates from a submitted form: `### Label`, a blank line, the value."""
    out: list[str] = []
    for f in fields:
        if f.type == "markdown":
            continue
        out += [f"### {f.label}", ""]
        if f.type == "checkboxes":
            out += [f"- [{'X' if c else ' '}] {o}" for o, c in zip(f.options, f.checked)]
        elif not f.value.strip():
            out.append("_No response_")
        elif f.type == "textarea" and f.render:
            out.append(fence(f.value, str(f.render)))
        else:
            out.append(f.value.rstrip("\n"))
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
