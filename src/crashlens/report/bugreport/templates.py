"""Jinja2 for bug reports: a sandboxed, strict environment whose errors name the missing key.

    render_markdown(source, name, ctx)   a Markdown template -> text (TemplateError: one line)
    section(name, ctx)                   one section of the built-in report (sections.md.j2)
    builtin_dir()                        data/templates/, the built-in templates

The sandbox (jinja2.sandbox.SandboxedEnvironment) has no access to Python internals and no
file system beyond the built-in templates; autoescape is off (Markdown, not HTML). It is also
bounded: a render stops with a TemplateError past MAX_OUTPUT characters or MAX_SECONDS; `*`,
`**`, `%` and `+` refuse results larger than MAX_OUTPUT, calls and filters refuse integer
arguments above MAX_INT_ARG (widths, counts), `range` stays below jinja2's MAX_RANGE, and
recursion too deep is an error of the template, not of crashlens.
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
MAX_OUTPUT = 1 << 20  # characters one render may produce
MAX_SECONDS = 10.0  # wall time of one render
MAX_INT_ARG = 100_000  # an integer argument of a call or filter (widths, counts, repeats)


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


def _bounded_sandbox():
    """A SandboxedEnvironment subclass whose operators, calls and filters are bounded."""
    import functools
    import re
    import time

    from jinja2.sandbox import SandboxedEnvironment, SecurityError

    big_width = re.compile(r"\d{7,}")

    def check_args(what: str, args: Iterable[Any]) -> None:
        for a in args:
            if isinstance(a, int) and not isinstance(a, bool) and abs(a) > MAX_INT_ARG:
                raise SecurityError(f"{what}: argument {a} is above the limit of {MAX_INT_ARG}")
            if isinstance(a, str) and "{" in a and big_width.search(a):
                raise SecurityError(f"{what}: a format width above the limit")

    class Bounded(SandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "%", "+"})
        deadline = float("inf")

        def tick(self) -> None:
            if time.monotonic() > self.deadline:
                raise SecurityError(f"the template ran longer than {MAX_SECONDS:g} s")

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            self.tick()
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_OUTPUT:
                        raise SecurityError(f"a sequence repeated to more than {MAX_OUTPUT} items")
            elif operator == "**":
                if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and \
                        right * max(abs(left), 2).bit_length() > 8 * MAX_OUTPUT:
                    raise SecurityError("a power too large")
            elif operator == "%":
                if isinstance(left, (str, bytes)) and big_width.search(str(left)):
                    raise SecurityError("a format width above the limit")
            elif operator == "+":
                if isinstance(left, (str, bytes, list, tuple)) and isinstance(right, type(left)) and \
                        len(left) + len(right) > MAX_OUTPUT:
                    raise SecurityError(f"a sequence of more than {MAX_OUTPUT} items")
            return super().call_binop(context, operator, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            __self.tick()
            check_args(getattr(__obj, "__name__", "a call"), (*args, *kwargs.values()))
            method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
            if isinstance(getattr(method, "__self__", None), str) and getattr(method, "__name__", "") in (
                    "format", "format_map"):
                check_args("format", (method.__self__,))
            return super().call(__context, __obj, *args, **kwargs)

    def bounded_filter(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            check_args(f"filter {name}", (*args[1:], *kwargs.values()))
            return fn(*args, **kwargs)
        return wrapper

    return Bounded, bounded_filter


def _environment(top_names: Iterable[str]):
    from jinja2 import FileSystemLoader, StrictUndefined
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

    Bounded, bounded_filter = _bounded_sandbox()
    env = Bounded(
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
    env.globals.pop("lipsum", None)  # paragraphs by the thousand
    env.filters = {name: bounded_filter(name, fn) for name, fn in env.filters.items()}
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

    import time

    env = _environment(ctx)
    wrapped = {k: _wrap(v, k) for k, v in ctx.items()}
    try:
        tmpl = env.from_string(source)
        env.deadline = time.monotonic() + MAX_SECONDS
        out: list[str] = []
        size = 0
        for piece in tmpl.generate(wrapped):
            size += len(piece)
            if size > MAX_OUTPUT:
                raise SecurityError(f"the template wrote more than {MAX_OUTPUT:,} characters")
            env.tick()
            out.append(piece)
        return "".join(out)
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
    except RecursionError:
        raise TemplateError(f"template {name}: recursion too deep (a macro that calls itself without end?)") from None
    except (OverflowError, MemoryError) as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") +
                            f": over a limit: {one_line(str(exc)) or type(exc).__name__}") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError) as exc:
        line = _template_line(exc, name)
        raise TemplateError(f"template {name}" + (f", line {line}" if line else "") +
                            f": {type(exc).__name__}: {exc}") from None


def section(name: str, ctx: Mapping[str, Any]) -> str:
    """One section of the built-in report (a macro of data/templates/sections.md.j2)."""
    macro = name if name.endswith("_plain") else name + "_section"
    src = '{% import "' + SECTIONS + '" as s with context %}{{ s.' + macro + '() }}'
    return render_markdown(src, f"{SECTIONS}:{name}", ctx).strip("\n")
