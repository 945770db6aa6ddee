"""Jinja2 for bug reports: a sandboxed, strict environment whose errors name the missing key.

    render_markdown(source, name, ctx)   a Markdown template -> text (TemplateError: one line)
    section(name, ctx)                   one section of the built-in report (sections.md.j2)
    builtin_dir()                        data/templates/, the built-in templates

The sandbox (jinja2.sandbox.SandboxedEnvironment) has no access to Python internals and no
file system beyond the built-in templates; autoescape is off (Markdown, not HTML).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from ...errors import CrashlensError
from ...knowledge import data_path
from ..text import md_text, one_line
from .markup import code, fence, loc

BUILTIN = "bug-report.md.j2"
SECTIONS = "sections.md.j2"


class TemplateError(CrashlensError):
    help = "See docs/report.md for the template context and syntax."


class _Dict(dict):
    """A dict that knows its path in the context, for error messages."""

    __slots__ = ("_path",)


class _List(list):
    __slots__ = ("_path",)


def _wrap(value: Any, path: str) -> Any:
    if isinstance(value, Mapping):
        out = _Dict((k, _wrap(v, f"{path}.{k}" if path else str(k))) for k, v in value.items())
        out._path = path
        return out
    if isinstance(value, (list, tuple)):
        out_l = _List(_wrap(v, f"{path}[{i}]") for i, v in enumerate(value))
        out_l._path = path
        return out_l
    return value


def _environment(top_names: Iterable[str]):
    from jinja2 import FileSystemLoader, StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment
    from jinja2.utils import missing

    names = sorted(top_names)

    class ClearUndefined(StrictUndefined):
        __slots__ = ()

        @property
        def _undefined_message(self) -> str:  # type: ignore[override]
            if self._undefined_hint:
                return self._undefined_hint
            obj, name = self._undefined_obj, self._undefined_name
            if obj is missing:
                return f"'{name}' is undefined (top-level names: {', '.join(names)})"
            path = getattr(obj, "_path", None)
            if isinstance(obj, dict) and path is not None:
                keys = ", ".join(sorted(map(str, obj))) or "none"
                return f"'{path}.{name}' is undefined ({path} has: {keys})"
            if isinstance(obj, list) and path is not None:
                return f"'{path}[{name}]' is undefined ({path} has {len(obj)} item(s))"
            if obj is None:
                return f"'{name}' is undefined: the value it was looked up on is empty (guard it with {{% if … %}})"
            return f"'{name}' is undefined on a {type(obj).__name__}"

    env = SandboxedEnvironment(
        loader=FileSystemLoader(str(builtin_dir())),
        autoescape=False,
        undefined=ClearUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update({"loc": loc, "fence": fence, "code": code, "short": one_line,
                        "basename": lambda p: os.path.basename(str(p or "")),
                        "conf": lambda x: f"{float(x):.2f}", "md": md_text,
                        "bullets": lambda xs: "\n".join(f"- {x}" for x in xs)})
    env.globals.update({"loc": loc, "fence": fence, "code": code})
    return env


def builtin_dir() -> Path:
    return data_path("templates")


def _template_line(exc: BaseException, name: str) -> int | None:
    import traceback

    line = getattr(exc, "lineno", None)
    if line:
        return line
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if fr.filename in (name, "<template>"):
            return fr.lineno
    return None


def render_markdown(source: str, name: str, ctx: Mapping[str, Any]) -> str:
    """Render a Markdown template with the context; errors become one-line TemplateErrors."""
    from jinja2 import TemplateError as JinjaError, TemplateSyntaxError, UndefinedError
    from jinja2.sandbox import SecurityError

    env = _environment(ctx)
    wrapped = {k: _wrap(v, k) for k, v in ctx.items()}
    try:
        tmpl = env.from_string(source)
        return tmpl.render(wrapped)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"template {name}, line {exc.lineno}: syntax error: {exc.message}") from None
    except UndefinedError as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") + f": {exc.message}") from None
    except SecurityError as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") +
                            f": not allowed in a template: {exc}") from None
    except JinjaError as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") + f": {exc}") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError) as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") +
                            f": {type(exc).__name__}: {exc}") from None


def section(name: str, ctx: Mapping[str, Any]) -> str:
    """One section of the built-in report (a macro of data/templates/sections.md.j2)."""
    macro = name if name.endswith("_plain") else name + "_section"
    src = '{% import "' + SECTIONS + '" as s with context %}{{ s.' + macro + '() }}'
    return render_markdown(src, f"{SECTIONS}:{name}", ctx).strip("\n")
