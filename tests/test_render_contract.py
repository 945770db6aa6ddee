"""Renderers on the widths and markups they meet (issue 10, section 5): 80-column terminals keep a
cause's category and confidence and the indent of wrapped lines; Markdown never lets input text
(`<module>`, `**batch`, `__init__`) turn into HTML or emphasis."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from crashlens.pipeline import analyze_paths, analyze_text
from crashlens.report.text import md_text
from crashlens.signature import signature

from .conftest import ROOT

EXAMPLE = ROOT / "examples" / "seed-crash"

LOG = """\
Traceback (most recent call last):
  File "/srv/job/train.py", line 12, in <module>
    main(**cfg)
  File "/srv/job/train.py", line 9, in main
    model.__init__(**cfg)
  File "/srv/job/model.py", line 40, in __init__
    self.weight = torch.empty(n, n, device="cuda")
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.25 GiB is free. Process 4242 has 77.80 GiB memory in use. Of the allocated memory 76.00 GiB is allocated by PyTorch <caching allocator>
"""


@pytest.fixture(scope="module")
def example():
    a = analyze_paths([str(EXAMPLE)])
    return a, signature(a)


def _terminal(a, sig, width: int) -> list[str]:
    from crashlens.report.terminal import render

    buf = io.StringIO()
    render(a, sig, Console(file=buf, width=width, color_system=None), top=3)
    return buf.getvalue().splitlines()


def test_80_columns_keep_category_and_confidence(example):
    a, sig = example
    lines = _terminal(a, sig, 80)
    assert all(len(ln.rstrip()) <= 80 for ln in lines)
    titles = [ln for ln in lines if ln.startswith("╭─ #")]
    assert len(titles) >= 2
    for c, t in zip(a.causes, titles):
        assert c.category in t and f"confidence {c.confidence:.2f}" in t, t
    # the cause's own title is still printed, whole, right under its panel title
    first = lines.index(titles[0])
    assert a.causes[0].title in lines[first + 1]


def test_wide_terminal_keeps_the_title_in_the_panel_title(example):
    a, sig = example
    head = next(ln for ln in _terminal(a, sig, 200) if ln.startswith("╭─ #1"))
    assert a.causes[0].title in head and a.causes[0].category in head


def test_wrapped_lines_keep_their_indent(example):
    a, sig = example
    lines = _terminal(a, sig, 80)

    def continuation(label_start: int, indent: int) -> None:
        i = label_start + 1
        assert lines[i].startswith(" " * indent) and lines[i][indent] != " ", lines[i]

    prim = next(i for i, ln in enumerate(lines) if ln.startswith("Primary error"))
    continuation(prim, 15)  # the primary error wraps under its text, not under the label
    inside = [ln[2:-2] for ln in lines if ln.startswith("│ ")]  # panel contents
    bullets = [i for i, ln in enumerate(inside) if ln.startswith(("• ", "→ "))]
    wrapped = [i for i in bullets if i + 1 < len(inside) and inside[i + 1].strip()
               and not inside[i + 1].startswith(("• ", "→ ")) and not inside[i + 1].lstrip() == inside[i + 1]]
    assert wrapped, "the example has wrapped evidence lines"
    for i in wrapped:
        assert inside[i + 1].startswith("  ") and inside[i + 1][2] != " "


def _outside_code(md: str) -> str:
    md = re.sub(r"(?ms)^(`{3,}).*?^\1`*\s*$", "", md)  # fences
    return re.sub(r"(`+)[^`]*?\1", "", md)  # code spans


def test_md_text_escapes_html_and_emphasis():
    assert md_text("in <module>") == "in \\<module\\>"
    assert md_text("self.model(**batch)") == "self.model(\\*\\*batch)"
    assert md_text("calls __init__ on cuda_runtime") == "calls \\_\\_init\\_\\_ on cuda_runtime"
    assert md_text("use `a<b>` here") == "use `a<b>` here"  # code spans untouched
    assert md_text("1. not a list") == "1\\. not a list"


@pytest.mark.parametrize("renderer", ["analyze", "report"])
def test_markdown_has_no_raw_tags_or_emphasis_from_inputs(renderer, tmp_path):
    log = tmp_path / "train.log"
    log.write_text(LOG, encoding="utf-8")
    a = analyze_paths([str(log)])
    sig = signature(a)
    if renderer == "analyze":
        from crashlens.report.markdown import render

        md = render(a, sig, 3)
    else:
        from crashlens.report.bugreport import ReportOptions, make_report

        md = make_report(a, sig, ReportOptions()).text
    bare = _outside_code(md)
    assert not re.search(r"(?<!\\)<(module|caching|sm_)", bare), [ln for ln in bare.splitlines() if "<" in ln]
    assert not re.search(r"(?<![\\`])\*\*(batch|cfg)", bare)
    assert "module>" in md  # the frames are still shown, in code spans


def test_the_seed_example_code_path_is_a_code_span():
    a = analyze_text(LOG)
    from crashlens.report.markdown import render

    md = render(a, signature(a), 3)
    path = md.split("## Code path", 1)[1].strip().splitlines()[0]
    assert path.startswith("`") and path.endswith("`") and "<module>" in path
