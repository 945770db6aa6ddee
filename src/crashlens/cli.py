"""The command line: parse arguments, call the pipeline, print a renderer's output. Nothing else."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__
from .errors import (EXIT_BROKEN_PIPE, EXIT_FOUND, EXIT_INTERNAL, EXIT_INTERRUPTED,  # noqa: F401
                     EXIT_NOTHING, EXIT_USAGE, CrashlensError)


def _fail(exc: CrashlensError) -> None:
    click.echo(f"crashlens: error: {exc}", err=True)
    if exc.help:
        click.echo(f"crashlens: {exc.help}", err=True)
    sys.exit(exc.exit_code)


def _warn(text: str) -> None:
    click.echo(f"crashlens: warning: {text}", err=True)


def _console(no_color: bool = False):
    """The rich console of the terminal renderers: no colour with --no-color (or NO_COLOR set)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich exits 1 here; a closed pipe is 141
            self.quiet = True
            _quiet_stdout()
            raise SystemExit(EXIT_BROKEN_PIPE)

    ctx = click.get_current_context(silent=True)
    root = ctx.find_root().obj if ctx is not None else None
    if no_color or (root and root.get("no_color")):
        return _Console(color_system=None)  # no escape codes at all: neither colours nor bold
    return _Console()


def _check_gpu(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--gpu: a value that names no GPU (not sm_XX, X.Y nor a name in data/gpus.yaml) is warned about."""
    if value:
        from .binary.cudacompat import parse_gpu

        if parse_gpu(value) is None:
            _warn(f"--gpu {value!r} is not a GPU crashlens knows (give sm_XX, a compute capability such as 9.0, "
                  "or a name such as H100); ignored")
            return None
    return value


class _Progress:
    """A transient status line on stderr while long work runs (a cold ISA census takes 8-15 s),
    only when stderr is a terminal: pipes, files and CI logs get nothing."""

    def __init__(self, text: str) -> None:
        self._status = None
        try:
            tty = sys.stderr.isatty()
        except (AttributeError, ValueError):
            tty = False
        if tty:
            from rich.console import Console

            self._status = Console(stderr=True).status(text, spinner="line")

    def __enter__(self) -> "_Progress":
        if self._status is not None:
            self._status.start()
        return self

    def update(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()


_NO_COLOR = click.option("--no-color", is_flag=True, help="No colours or styles (also: the NO_COLOR variable).")


class _Main(click.Group):
    """The group: Ctrl-C exits 130 and a closed pipe 141, quietly, as `sh` reports them (exit 1 is
    reserved for "nothing recognised")."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("crashlens: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            _quiet_stdout()
            sys.exit(EXIT_BROKEN_PIPE)


def _quiet_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's last flush cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="crashlens")
@click.option("--no-color", is_flag=True, help="No colours or styles in any command (also: NO_COLOR=1).")
@click.pass_context
def main(ctx: click.Context, no_color: bool) -> None:
    """crashlens: ranked root causes for crashed ML and GPU jobs.

    Shell completion (bash, zsh, fish): eval "$(_CRASHLENS_COMPLETE=bash_source crashlens)"
    (zsh_source, fish_source for the others); see README.md.
    """
    ctx.obj = {"no_color": no_color}


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (schema crashlens.analysis/1).")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print a Markdown report (secrets redacted).")
@click.option("--no-redact", is_flag=True, help="Do not redact secrets from the Markdown report and the CI outputs.")
@click.option("--redact", is_flag=True, help="Also redact secrets from the JSON and terminal reports (docs/report.md).")
@click.option("--top", default=3, show_default=True, help="How many causes the terminal report shows in full.")
@click.option("-v", "--verbose", is_flag=True, help="Show every cause with its reasoning.")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path), help="Use another rule directory.")
@click.option("--lib-path", "lib_paths", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="A folder to search for libraries named in the evidence (repeatable).")
@click.option("--sysroot", type=click.Path(file_okay=False, path_type=Path),
              help="A copy of the crashed machine's root: absolute library paths are looked up under it.")
@click.option("--gpu", callback=_check_gpu, help="The GPU, when the logs do not say: sm_90, 9.0 or a name such as H100.")
@click.option("--cpu-flags", help="The CPU's flags, when the logs do not list them: a cpuinfo/lscpu file or a comma list.")
@_NO_COLOR
@click.option("--github", is_flag=True, help="GitHub Actions: workflow-command annotations, the report grouped, "
              "a step summary appended to $GITHUB_STEP_SUMMARY (redacted). See docs/ci.md.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a JUnit XML file (one testcase per cause, the top one failing).")
@click.option("--codequality", "codequality_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a GitLab Code Quality JSON file.")
@click.option("--fail-on", "fail_on", multiple=True, metavar="CATEGORY",
              help="Exit 4 when the top cause is in this category (repeatable, comma lists, `any`).")
def analyze(inputs: tuple[str, ...], as_json: bool, as_markdown: bool, top: int, verbose: bool, rules_dir: Path | None,
            lib_paths: tuple[Path, ...], sysroot: Path | None, gpu: str | None, cpu_flags: str | None,
            github: bool = False, junit_file: Path | None = None, codequality_file: Path | None = None,
            fail_on: tuple[str, ...] = (), no_redact: bool = False, no_color: bool = False, redact: bool = False) -> None:
    """Analyse logs, dmesg, environment dumps, libraries, core files, folders and archives.

    `-` reads standard input (`cat run.log | crashlens analyze -`)."""
    from .pipeline import Options, analyze_paths
    from .engine.rules import taxonomy
    from .report import ci

    try:
        gate = ci.parse_fail_on(fail_on, taxonomy())
        flags = frozenset(_cpu_flags(cpu_flags)) if cpu_flags else None
        with _Progress(f"crashlens: analysing {len(inputs)} input(s)…"):
            result = analyze_paths(list(inputs), Options(rules_dir=rules_dir, lib_paths=lib_paths,
                                                         sysroot=sysroot, gpu=gpu, cpu_flags=flags))
    except CrashlensError as exc:
        _fail(exc)
        return
    if not result.causes and not any(i.kind in ("text", "elf", "elf-core") for i in result.inputs):
        for n in _unique_notes(result.notes, result.inputs):
            click.echo(f"crashlens: {n}", err=True)
        click.echo("crashlens: error: none of the inputs could be read as a log, dmesg, core or library", err=True)
        sys.exit(EXIT_USAGE)
    from .signature import signature

    sig = signature(result)  # a stage of its own: the renderers receive it
    code = ci.exit_code(result, gate)
    if github or junit_file or codequality_file:
        try:
            ci.emit(result, sig, github=github, junit=junit_file, codequality=codequality_file, code=code, top=top,
                    verbose=verbose, fmt="json" if as_json else "markdown" if as_markdown else "terminal",
                    redact=not no_redact)
        except CrashlensError as exc:
            _fail(exc)
        if github:  # the report went out with the workflow commands
            sys.exit(code)
    if redact and not no_redact and not as_markdown:  # --redact: the JSON and terminal reports too
        from .report.redact import redacted

        result, sig, red = redacted(result, sig)
        click.echo(red.summary(), err=True)
    if as_json:
        from .report.json import render

        click.echo(render(result, sig))
    elif as_markdown:
        from .report.markdown import shareable

        click.echo(shareable(result, sig, top, not no_redact))
    else:
        from .report.terminal import render as render_term

        render_term(result, sig, _console(no_color), top, verbose)
    sys.exit(code)


@main.group()
def rules() -> None:
    """The rule base: list, validate, test."""


@rules.command("list")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path))
def rules_list(rules_dir: Path | None) -> None:
    """List every rule with its category and weight."""
    from .engine.rules import load_rules

    try:
        rb = load_rules(rules_dir)
    except CrashlensError as exc:
        _fail(exc)
        return
    for r in rb.rules:
        click.echo(f"{r.id:40} {r.category:32} {r.weight:.2f}  {r.title}")
    click.echo(f"{len(rb.rules)} rules, {len({r.category for r in rb.rules})} categories")


@rules.command("validate")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path))
def rules_validate(rules_dir: Path | None) -> None:
    """Check every rule file against the schema and the taxonomy."""
    from .engine.rules import default_rules_dir, validate_documents

    d = rules_dir or default_rules_dir()
    problems = validate_documents(d)
    for p in problems:
        click.echo(p)
    if problems:
        click.echo(f"{len(problems)} problem(s) in {d}", err=True)
        sys.exit(1)
    click.echo(f"rule base {d}: valid")


@rules.command("test")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("-k", "only", help="Only rules whose id contains this text.")
def rules_test(rules_dir: Path | None, only: str | None) -> None:
    """Run every rule's inline examples through the whole pipeline."""
    from .pipeline import text_analyzer
    from .engine.examples import run_examples

    try:
        results = run_examples(text_analyzer(rules_dir), rules_dir, only)
    except CrashlensError as exc:
        _fail(exc)
        return
    if not results:
        click.echo(f"crashlens: error: no rule example matched -k {only!r}" if only else
                   "crashlens: error: the rule base has no inline examples", err=True)
        sys.exit(EXIT_USAGE)
    failed = [r for r in results if not r.ok]
    for r in failed:
        click.echo(f"FAIL {r.rule}: expected {'a firing' if r.expect else 'no firing'} on:\n    "
                   + r.text.strip().replace("\n", "\n    "))
    click.echo(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


@main.command("eval")
@click.argument("corpus", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the scores as JSON.")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path))
def eval_cmd(corpus: Path, as_json: bool, rules_dir: Path | None) -> None:
    """Score the analyzer on a corpus folder (cases/*/case.yaml): top-1, top-3, recall, misses."""
    from .evaluation.corpus import evaluate_corpus, render_scores

    scores = evaluate_corpus(corpus, rules_dir)
    if as_json:
        import json

        click.echo(json.dumps(scores, indent=2))
    else:
        click.echo(render_scores(scores))


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--gpu", callback=_check_gpu,
              help="Judge CUDA images against this device: sm_90, 9.0, or a name such as H100, 'RTX 4090'.")
@click.option("--driver", help="NVIDIA driver version (e.g. 535.104.05) for PTX JIT checks.")
@click.option("--cpu-flags", help="CPU flags to check the x86 ISA against: a /proc/cpuinfo or lscpu file, or a comma list.")
@click.option("--no-isa", is_flag=True, help="Skip the x86 instruction-set census.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (schema crashlens.inspect/1).")
@click.option("--image", "image_index", type=int, help="Decompress CUDA image N (0-based, in listing order) of the "
              "first file and print its cubin ELF header or PTX header.")
@_NO_COLOR
def inspect(files: tuple[str, ...], gpu: str | None, driver: str | None, cpu_flags: str | None, no_isa: bool,
            as_json: bool, image_index: int | None, no_color: bool = False) -> None:
    """ELF facts, CUDA images (SASS/PTX per arch) and the x86 ISA of libraries and executables."""
    from .inspect import inspect_file

    if image_index is not None:
        from .inspect import image_header

        try:
            header = image_header(files[0], image_index)
        except CrashlensError as exc:
            _fail(exc)
            return
        import json

        click.echo(json.dumps(header, indent=2, default=str))
        return

    flags = _cpu_flags(cpu_flags) if cpu_flags else None
    reports = []
    with _Progress("crashlens: inspecting…") as progress:
        for n, f in enumerate(files, 1):
            progress.update(f"crashlens: inspecting {f} ({n}/{len(files)}): ELF, CUDA images"
                            + ("" if no_isa else ", x86 instruction-set census (cached by build-id)") + "…")
            reports.append(inspect_file(f, gpu=gpu, driver=driver, cpu_flags=flags, isa=not no_isa))
    if as_json:
        from .report.inspect import render_json

        click.echo(render_json(reports))
    else:
        from .report.inspect import render_text

        render_text(reports, _console(no_color))
    if all(r.facts is None for r in reports):
        for r in reports:
            click.echo(f"crashlens: error: {r.errors[0] if r.errors else r.path}", err=True)
        sys.exit(EXIT_USAGE)
    incompatible = any(r.verdict is not None and r.verdict.compatible is False for r in reports)
    missing = any(r.isa_missing and r.isa_missing.get("baseline") for r in reports)
    sys.exit(1 if incompatible or missing else EXIT_FOUND)


def _unique_notes(notes, inputs) -> list[str]:
    """The notes once each: an unreadable input's reason is noted by the walk ("X: unreadable: R")
    and again by the reader ("X: R")."""
    said = {f"{i.name}: unreadable: {i.note}" for i in inputs if i.kind == "unreadable"}
    return [n for n in dict.fromkeys(notes)
            if not (n not in said and any(n == s.replace(": unreadable: ", ": ", 1) for s in said))]


def _cpu_flags(spec: str) -> set[str]:
    """CPU flags from a cpuinfo/lscpu file, or a comma/space separated list."""
    import os

    if os.path.isfile(spec):
        from .pipeline import cpu_flags_from_file

        flags = cpu_flags_from_file(spec)
        if flags is None:
            raise click.BadParameter(f"no CPU flags found in {spec}", param_hint="--cpu-flags")
        return flags
    return {f.strip().lower() for f in spec.replace(",", " ").split() if f.strip()}


@main.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--db", type=click.Path(dir_okay=False, path_type=str),
              help="Keep results in this SQLite file or PostgreSQL database (postgresql://user@host:port/dbname, "
                   "needs crashlens[postgres]), so recurring crashes across runs are recognised.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON triage (schema crashlens.triage/1).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Parallel analyses (default: the number of CPUs).")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=str), help="Use another rule directory.")
def triage(dirs: tuple[str, ...], db: str | None, as_json: bool, jobs: int | None, rules_dir: str | None) -> None:
    """Analyse many crash bundles in parallel and group them by crash signature (docs/ci.md)."""
    from .triage import DatabaseError, render_json, render_text, triage as run_triage

    try:
        t = run_triage(list(dirs), jobs=jobs, db=db, rules_dir=rules_dir)
    except DatabaseError as exc:
        click.echo(f"crashlens: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(render_json(t) if as_json else render_text(t), nl=False)
    for p in t.problems:
        click.echo(f"crashlens: {p}", err=True)
    if not t.bundles:
        click.echo("crashlens: error: no crash bundle found" + (f" ({'; '.join(t.problems)})" if t.problems else ""),
                   err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FOUND if t.analysed else EXIT_NOTHING)


def _run_switches() -> list[str]:
    from .capture.arm import switch_ids

    return [*switch_ids(), "samples", "all"]


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path),
              help="The bundle folder (default: ./crashlens-run-DATE-TIME-PID, or under $CRASHLENS_RUN_DIR).")
@click.option("--no", "off", multiple=True, metavar="SWITCH",
              help="Turn off one armed switch (core, faulthandler, cuda-coredump, flight-recorder, "
                   "elastic-error-file, samples) or all; repeatable.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              help="Seconds between two samples of memory, disks and GPUs.")
@click.option("-q", "--quiet", is_flag=True, help="Do not print the analysis (the bundle still holds it).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(out: Path | None, off: tuple[str, ...], interval: float, quiet: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with the evidence armed, keep what it leaves in a bundle, analyse it if it fails
    (docs/run.md): crashlens run -- python train.py --lr 3e-4"""
    import shutil as _shutil

    from .capture import exit_like, run_command

    bad = [o for o in off if o not in _run_switches()]
    if bad:
        raise click.BadParameter(f"unknown switch {bad[0]!r}; one of {', '.join(_run_switches())}", param_hint="--no")
    argv = list(command)
    if _shutil.which(argv[0]) is None and not (("/" in argv[0]) and Path(argv[0]).exists()):
        click.echo(f"crashlens run: {argv[0]}: command not found", err=True)
        sys.exit(127)
    result = run_command(argv, out=out, off=off, interval=interval)
    ex = result.exit
    failed = ex.status != 0
    if not quiet:
        try:
            _report_run(result, failed)
        except Exception as exc:   # noqa: BLE001 - the job's exit status must come through whatever happens
            click.echo(f"crashlens run: the analysis failed ({type(exc).__name__}: {exc}); "
                       f"the bundle is in {result.bundle}", err=True)
    exit_like(ex)


def _report_run(result, failed: bool) -> None:
    """The analysis of a failed run on stderr (the job's stdout stays the job's), and analysis.json."""
    from .pipeline import analyze_paths
    from .report.json import render as render_json
    from .signature import signature

    where = result.bundle
    try:
        shown = where.relative_to(Path.cwd())
    except ValueError:
        shown = where
    if not failed:
        click.echo(f"crashlens run: the job succeeded ({result.exit.duration:.1f} s); bundle in {shown}", err=True)
        return
    try:
        analysis = analyze_paths([where])
    except CrashlensError as exc:
        click.echo(f"crashlens run: the bundle {shown} could not be analysed: {exc}", err=True)
        return
    sig = signature(analysis)
    (where / "analysis.json").write_text(render_json(analysis, sig) + "\n", encoding="utf-8")
    from rich.console import Console

    from .report.terminal import render as render_term

    ctx = click.get_current_context(silent=True)
    root = ctx.find_root().obj if ctx is not None else None
    plain = bool(root and root.get("no_color"))
    console = Console(stderr=True, color_system=None) if plain else Console(stderr=True)
    click.echo(f"crashlens run: the job failed (exit status {result.exit.status}); bundle in {shown}", err=True)
    render_term(analysis, sig, console, 3, False)


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--template", type=click.Path(dir_okay=False, path_type=Path),
              help="A Markdown template (Jinja2) or a GitHub issue form (.yml); default: the built-in bug report.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
@click.option("--url", "repo_url", metavar="REPO", help="Print a prefilled new-issue URL for https://github.com/OWNER/REPO.")
@click.option("--url-limit", default=8000, show_default=True, help="Longest URL to print; long fields are cut to fit.")
@click.option("--title", help="The issue title (default: the primary error and the GPU).")
@click.option("--no-redact", is_flag=True, help="Do not redact secrets.")
@click.option("--redact", "redact_more", multiple=True, type=click.Choice(["emails", "users", "hosts", "all"]),
              help="Also redact e-mail addresses, user names in home paths, host names (repeatable).")
@click.option("--redact-string", "redact_strings", multiple=True, metavar="TEXT", help="Also redact TEXT (repeatable).")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path), help="Use another rule directory.")
@click.option("--lib-path", "lib_paths", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="A folder to search for libraries named in the evidence (repeatable).")
@click.option("--sysroot", type=click.Path(file_okay=False, path_type=Path), help="A copy of the crashed machine's root.")
@click.option("--gpu", callback=_check_gpu, help="The GPU, when the logs do not say: sm_90, 9.0 or a name such as H100.")
@click.option("--cpu-flags", help="The CPU's flags, when the logs do not list them: a cpuinfo/lscpu file or a comma list.")
def report(inputs: tuple[str, ...], template: Path | None, output: Path | None, repo_url: str | None, url_limit: int,
           title: str | None, no_redact: bool, redact_more: tuple[str, ...], redact_strings: tuple[str, ...],
           rules_dir: Path | None, lib_paths: tuple[Path, ...], sysroot: Path | None, gpu: str | None,
           cpu_flags: str | None) -> None:
    """Fill a bug report (built-in, a Markdown template or a GitHub issue form) from an analysis. docs/report.md"""
    from .pipeline import Options, analyze_paths
    from .errors import InputError
    from .report.bugreport import ReportOptions, TemplateError, make_report, validate_repo
    from .signature import signature

    more = set(redact_more)
    opts = ReportOptions(template=template, url=repo_url, url_limit=url_limit, redact=not no_redact, title=title,
                         emails=bool(more & {"emails", "all"}), home_users=bool(more & {"users", "all"}),
                         hostnames=bool(more & {"hosts", "all"}), extra=redact_strings)
    try:
        if repo_url:
            validate_repo(repo_url)
        if template is not None and not template.is_file():
            raise TemplateError(f"template {template}: no such file")
        flags = frozenset(_cpu_flags(cpu_flags)) if cpu_flags else None
        a = analyze_paths(list(inputs), Options(rules_dir=rules_dir, lib_paths=lib_paths, sysroot=sysroot, gpu=gpu,
                                                cpu_flags=flags))
        if not a.causes and not any(i.kind in ("text", "elf", "elf-core") for i in a.inputs):
            raise InputError("none of the inputs could be read as a log, dmesg, core or library"
                             + (f" ({a.notes[0]})" if a.notes else ""))
        result, found = make_report(a, signature(a), opts), bool(a.causes)
        if output is not None:
            output.write_text(result.text, encoding="utf-8")
    except CrashlensError as exc:
        _fail(exc)
        return
    except OSError as exc:
        click.echo(f"crashlens: error: {output}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_USAGE)
    if output is None:
        click.echo(result.text, nl=False)
    for m in result.messages:
        click.echo(m if m.startswith("crashlens") else f"crashlens: {m}", err=True)
    sys.exit(EXIT_FOUND if found else EXIT_NOTHING)


def _tolerant_streams() -> None:
    """stdout/stderr whose encoding cannot write a character (PYTHONIOENCODING=latin-1, a C
    locale) print a replacement instead of failing."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and (stream.errors or "strict") == "strict":
                stream.reconfigure(errors="replace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass


def entry() -> None:
    """Console-script entry: an unexpected exception becomes one line and exit code 3
    (CRASHLENS_DEBUG=1 shows the traceback); Ctrl-C exits 130, a closed stdout pipe 141."""
    import os

    _tolerant_streams()
    try:
        try:
            main(standalone_mode=True)
        finally:
            sys.stdout.flush()  # a reader that went away is noticed here, not at interpreter exit
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        if os.environ.get("CRASHLENS_DEBUG"):
            raise
        click.echo(f"crashlens: internal error: {type(exc).__name__}: {exc} "
                   "(set CRASHLENS_DEBUG=1 for the traceback and please report it)", err=True)
        sys.exit(EXIT_INTERNAL)
