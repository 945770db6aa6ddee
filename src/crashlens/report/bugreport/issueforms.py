"""GitHub issue forms (.github/ISSUE_TEMPLATE/*.yml): load one, fill its fields from the bug-report
context, and write the issue body GitHub makes from a submitted form.

    IssueForm.load(path) / IssueForm.parse(doc, name)
    fill_form(form, ctx) -> fields        by id and label, then description, type and `render`
    form_body(fields) -> str              `### Label`, a blank line, the value
    unprefillable(fields) -> labels       filled fields a prefilled URL cannot carry (no `id`)

Real forms (PyTorch's, vLLM's, Lightning's have fields without ids) ask in their descriptions:
"paste the error message with the **full** traceback" puts the whole (redacted) traceback in that
field; "run collect_env.py and paste the output" (or `transformers env`) puts the environment
dump from the logs, verbatim, inside the form's own `<details>` default when it has one; a
`render: python` field gets no shell command; fields for maintainers' handles stay empty. No tool
chatter goes into a field: no "not in the logs" rows, no local paths of the inputs.
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
    description: str = ""  # attributes.description (what the maintainers ask for)


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
                          default=str(attrs.get("value") or "") if t != "markdown" else "",
                          description=str(attrs.get("description") or "") if t != "markdown" else "")
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


# fields meant for people, not for the report (maintainers' handles, CCs)
_NOT_OURS = r"who can help|\bcc\b|\bmention|assignees?|reviewers?|\btag\b|@"
_ASKS_TRACEBACK = r"traceback|stack ?traces?|error messages?|\berror logs?\b|backtrace"
_ASKS_ENV_DUMP = r"collect_env|collect env|transformers env|\benv\b|pip list|nvidia-smi|system info|versions?\b"
_SHELL_RENDERS = {"", "sh", "shell", "bash", "zsh", "console", "text", "txt", "plain", "plaintext", "log"}


def _description(f: FormField) -> str:
    """The description without its code blocks (examples of what to paste), lower-cased."""
    return re.sub(r"(?s)```.*?```", " ", f.description).lower()


def _text_key(f: FormField) -> str | None:
    words = _words(f)
    if re.search(_NOT_OURS, f.label.lower()) or re.search(_NOT_OURS, (f.id or "").lower()):
        return None
    key = next((k for k, p in _TEXT_MAP if re.search(p, words)), None)
    if key is None:  # "More info": what the description asks for decides
        desc = re.sub(r"[_\-/]+", " ", _description(f))
        key = next((k for k, p in _TEXT_MAP if re.search(p, desc)), None)
    if key in ("summary", "steps", "context") and re.search(_ASKS_ENV_DUMP, words) and \
            re.search(r"version|environment|system", words):
        key = "environment"
    return key


def _in_default(f: FormField, value: str) -> str:
    """A dump placed in the form's own `<details>` default (Lightning's, vLLM's), else fenced."""
    if f.render:
        return value
    block = fence(value)
    if "<details>" in f.default:
        m = re.search(r"(?s)^(.*?<details>.*?</summary>\s*\n)", f.default)
        head = m.group(1) if m else "<details>\n<summary>Environment</summary>\n"
        return f"{head.rstrip()}\n\n{block}\n\n</details>"
    return block


def fill_form(form: IssueForm, ctx: Mapping[str, Any]) -> list[FormField]:
    """Fill every field of the form from the context (by id and label, then description, type
    and render); what the form has no field for goes to its free field."""
    cache: dict[str, str] = {}

    def sec(name: str) -> str:
        if name not in cache:
            cache[name] = section(name, ctx)
        return cache[name]

    env_dump = str(ctx.get("env_dump") or "")
    used: set[str] = set()
    for f in form.fields:
        words = _words(f)
        if f.type == "textarea":
            key = _text_key(f)
            if key is None or key in used and key != "context":
                continue
            render = str(f.render).lower() if f.render else None
            value = ""
            if key == "environment":
                value = _in_default(f, env_dump) if env_dump else \
                    (sec("environment_plain") if render is not None else _in_default(f, sec("environment_plain")))
            elif key == "logs":
                value = sec("logs_plain") if render is not None else sec("errors")
                key = "logs_plain" if render is not None else "errors"
            elif key == "steps" and render is not None:
                if render not in _SHELL_RENDERS:  # `render: python` wants code: crashlens has none
                    continue
                value, key = sec("command_plain"), "command_plain"
            elif render is not None and render not in _SHELL_RENDERS:
                continue
            else:
                value = sec(key)
            if key == "root_cause" and ctx.get("code_path_line"):
                value += "\n\n**Code path**\n\n" + sec("code_path")
            if value.strip():
                f.value, f.filled_from = value, key
                used.add(key)
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
    filled = {f.filled_from for f in form.fields}
    # the full traceback goes where the form asks for one (PyTorch's and vLLM's "Describe the bug",
    # Transformers' "Reproduction") when no field is the logs' own
    if ctx.get("primary") and not filled & {"errors", "logs_plain"}:
        asks = next((f for f in form.fields if f.type == "textarea" and not f.render and f.filled_from
                     and re.search(_ASKS_TRACEBACK, _description(f) + " " + _words(f))), None)
        asks = asks or next((f for f in form.fields if f.type == "textarea" and f.filled_from == "summary"), None)
        if asks is not None:
            asks.value = asks.value.rstrip("\n") + "\n\n" + sec("errors")
            filled.add("errors")
    # what the form has no field for goes to its free field ("Additional context", "More info")
    extra = [(k, h) for k, h in (("root_cause", "Root cause analysis"), ("solution", "Proposed solution"),
                                 ("testing", "Testing")) if k not in filled]
    ctx_field = next((f for f in form.fields if f.filled_from == "context"), None)
    if ctx_field is not None and "root_cause" not in filled:  # the analysis below says it all
        ctx_field.value = ""
    if ctx_field is None and extra:  # a free field matched only by the words of its description
        ctx_field = next((f for f in form.fields if f.type == "textarea" and not f.filled_from and not f.render
                          and _text_key(f) == "context"), None)
        if ctx_field is not None:
            ctx_field.filled_from, ctx_field.value = "context", ""
    if ctx_field is not None:
        for k, heading in extra:
            body = sec(k) + ("\n\n**Code path**\n\n" + sec("code_path")
                             if k == "root_cause" and ctx.get("code_path_line") else "")
            ctx_field.value = (ctx_field.value.rstrip("\n") + "\n\n" if ctx_field.value.strip() else "") + \
                f"**{heading}**\n\n" + body
    return form.fields


def unprefillable(fields: Sequence[FormField]) -> list[str]:
    """Labels of the filled fields a prefilled URL cannot carry: GitHub fills form fields from
    query parameters named by their `id`, and a field without one stays empty."""
    return [f.label for f in fields if f.type in ("textarea", "input", "dropdown") and not f.id
            and f.value.strip() and f.value != f.default]


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
