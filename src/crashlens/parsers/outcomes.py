"""How a process ended, as shells, schedulers and launchers print it -> Evidence(kind="outcome").

parse_outcome(line) returns Evidence(kind="outcome", facts=...) or None. facts always has:

  signal       "SIGKILL", "SIGSEGV", "SIGILL", "SIGABRT", "SIGBUS", "SIGFPE", "SIGTERM", ... or None
  exit_code    int or None (negative: Python's subprocess convention, -N = killed by signal N)
  core_dumped  bool
  failed       bool (a signal, or an exit status other than 0)
  oom          bool (the line itself says out-of-memory: Slurm oom_kill, Kubernetes OOMKilled ...)
  source       shell | slurm | kubernetes | docker | torchrun | torch.multiprocessing |
               dataloader | python | python-faulthandler | failure-signal-handler | gdb | lldb |
               make | ide | ci | log (a generic "exit code N" line of unknown origin)

and, where the line tells: pid, command, message (the signal text as printed), shell (bash|zsh|
fish), imposed (True: the signal was sent to a healthy process by a launcher or scheduler),
sent_by, reason (time-limit, node-failure, preemption, cancelled, evicted), job_id, node, step,
local_rank, tasks.

Exit codes 129..159 are read as 128 + signal number (the shell convention); negative codes as
-signal. Localised bash messages come from glibc's strsignal() translations (glibc po/*.po:
zh_CN, ja, de, fr, es, ru; a few more from memory, marked below).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import regex as re

from crashlens.model import Evidence, Line
from crashlens.signals import SIGNAL_ALIASES as _SIGNAL_ALIASES, SIGNALS as _SIGNALS

__all__ = ["link_outcomes", "parse_outcome", "signal_name", "signal_from_exit_code"]



def signal_name(value: int | str | None) -> str | None:
    """9 -> "SIGKILL", "KILL"/"sigkill"/"SIGIOT" -> canonical name; None when unknown."""
    if value is None:
        return None
    if isinstance(value, int):
        return _SIGNALS.get(value)
    text = value.strip().upper()
    if text.isdigit():
        return _SIGNALS.get(int(text))
    if not text.startswith("SIG"):
        text = "SIG" + text
    text = _SIGNAL_ALIASES.get(text, text)
    return text if text in _SIGNALS.values() else None


def signal_from_exit_code(code: int | None) -> str | None:
    """128+N (shell) or -N (Python subprocess) -> signal N's name; anything else -> None."""
    if code is None:
        return None
    if code < 0:
        return _SIGNALS.get(-code)
    if 128 < code < 160:
        return _SIGNALS.get(code - 128)
    return None


# --------------------------------------------------------------------- signal message tables

# What bash prints for a job that died of a signal: glibc's strsignal() text, translated by
# the locale. Only messages that are unlikely to be printed for other reasons are listed; the
# translations of "Terminated" are left out where they also mean "finished" (de "Beendet",
# es "Terminado", fr "Complété", ru "Завершено").
_BASH_MESSAGES: dict[str, str] = {
    # English (C / en_* locales)
    "Hangup": "SIGHUP",
    "Illegal instruction": "SIGILL",
    "Trace/breakpoint trap": "SIGTRAP",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Killed": "SIGKILL",
    "Segmentation fault": "SIGSEGV",
    "Alarm clock": "SIGALRM",
    "Terminated": "SIGTERM",
    "User defined signal 1": "SIGUSR1",
    "User defined signal 2": "SIGUSR2",
    "CPU time limit exceeded": "SIGXCPU",
    "File size limit exceeded": "SIGXFSZ",
    "Bad system call": "SIGSYS",
    # zh_CN (glibc po/zh_CN.po)
    "非法指令": "SIGILL",
    "追踪与中断点陷阱": "SIGTRAP",
    "已放弃": "SIGABRT",
    "浮点数例外": "SIGFPE",
    "已杀死": "SIGKILL",
    "总线错误": "SIGBUS",
    "段错误": "SIGSEGV",
    "已终止": "SIGTERM",
    # ja (glibc po/ja.po; current glibc leaves "Illegal instruction" and "Segmentation fault"
    # untranslated, older releases printed the two forms below)
    "中止": "SIGABRT",
    "浮動小数点例外": "SIGFPE",
    "強制終了": "SIGKILL",
    "バスエラー": "SIGBUS",
    "不正な命令です": "SIGILL",
    "セグメンテーション違反です": "SIGSEGV",
    # de (glibc po/de.po)
    "Ungültiger Maschinenbefehl": "SIGILL",
    "Abgebrochen": "SIGABRT",
    "Gleitkomma-Ausnahme": "SIGFPE",
    "Getötet": "SIGKILL",
    "Bus-Zugriffsfehler": "SIGBUS",
    "Speicherzugriffsfehler": "SIGSEGV",
    # fr (glibc po/fr.po)
    "Instruction non permise": "SIGILL",
    "Abandon": "SIGABRT",
    "Exception en point flottant": "SIGFPE",
    "Processus arrêté": "SIGKILL",
    "Erreur du bus": "SIGBUS",
    "Erreur de segmentation": "SIGSEGV",
    # es (glibc po/es.po)
    "Instrucción ilegal": "SIGILL",
    "Abortado": "SIGABRT",
    "Excepción de coma flotante": "SIGFPE",
    "Terminado (killed)": "SIGKILL",
    "Error del bus": "SIGBUS",
    "Violación de segmento": "SIGSEGV",
    # ru (glibc po/ru.po)
    "Недопустимая инструкция": "SIGILL",
    "Аварийный останов": "SIGABRT",
    "Исключение в операции с плавающей точкой": "SIGFPE",
    "Убито": "SIGKILL",
    "Ошибка шины": "SIGBUS",
    "Ошибка сегментирования": "SIGSEGV",
    # pt_BR and it: segmentation fault only, from memory (not checked against the .po files)
    "Falha de segmentação": "SIGSEGV",
    "Errore di segmentazione": "SIGSEGV",
}

# zsh's own signal messages (lower case, printed as "zsh: <msg>  <command>" or in job lines).
_ZSH_MESSAGES: dict[str, str] = {
    "hangup": "SIGHUP",
    "interrupt": "SIGINT",
    "quit": "SIGQUIT",
    "illegal hardware instruction": "SIGILL",
    "trace trap": "SIGTRAP",
    "abort": "SIGABRT",
    "bus error": "SIGBUS",
    "floating point exception": "SIGFPE",
    "killed": "SIGKILL",
    "segmentation fault": "SIGSEGV",
    "invalid system call": "SIGSYS",
    "broken pipe": "SIGPIPE",
    "terminated": "SIGTERM",
    "cpu limit exceeded": "SIGXCPU",
    "file size limit exceeded": "SIGXFSZ",
    "user-defined signal 1": "SIGUSR1",
    "user-defined signal 2": "SIGUSR2",
}


def _alternation(messages: Mapping[str, str]) -> str:
    # Longest first, so "Terminado (killed)" wins over a shorter prefix.
    return "|".join(re.escape(m) for m in sorted(messages, key=len, reverse=True))


_BASH_ALT = _alternation(_BASH_MESSAGES)
_ZSH_ALT = _alternation(_ZSH_MESSAGES)
# bash's "(core dumped)" and its translations: zh "(核心已转储)", ja "(コアダンプ)",
# de "(Speicherabzug geschrieben)", es "(`core' generado)", ru "(стек памяти сброшен на диск)",
# pt_BR "(imagem do núcleo gravada)"; recognised by keyword rather than listed one by one.
_CORE = (
    r"[(（][^()（）]{0,40}?(?:core|dump|核心|转储|轉儲|コア|Speicherabzug|сброшен|дамп|mémoire|núcleo)"
    r"[^()（）]{0,40}[)）]"
)
_MSG_TAIL = rf"(?P<msg>{_BASH_ALT})(?:\s*(?P<core>{_CORE}))?"


def _base(source: str, **facts: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "signal": None,
        "exit_code": None,
        "core_dumped": False,
        "oom": False,
        "source": source,
    }
    out.update({k: v for k, v in facts.items() if v is not None})
    return out


def _int(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


def _exit_facts(source: str, code: str | int | None, **extra: Any) -> dict[str, Any]:
    value = int(code) if code is not None else None
    return _base(source, exit_code=value, signal=signal_from_exit_code(value), **extra)


# ------------------------------------------------------------------------------ builders


def _bash_message(m: re.Match) -> dict[str, Any]:
    groups = m.groupdict()
    msg = groups["msg"]
    facts = _base(
        "shell",
        signal=_BASH_MESSAGES[msg],
        core_dumped=bool(groups.get("core")),
        message=msg,
        shell="bash",
        pid=_int(groups.get("pid")),
        command=(groups.get("cmd") or "").strip() or None,
        script=groups.get("script"),
    )
    return facts


def _zsh_message(m: re.Match) -> dict[str, Any]:
    groups = m.groupdict()
    msg = groups["zmsg"]
    return _base(
        "shell",
        signal=_ZSH_MESSAGES[msg],
        core_dumped=bool(groups.get("core")),
        message=msg,
        shell="zsh",
        pid=_int(groups.get("pid")),
        command=(groups.get("cmd") or "").strip() or None,
    )


def _job_line(m: re.Match) -> dict[str, Any]:
    # "[1]+  Killed   python x.py" (bash) or "[1]  + 27331 killed  python x.py" (zsh)
    return _zsh_message(m) if m["zmsg"] else _bash_message(m)


def _terminated_by_signal(m: re.Match) -> dict[str, Any]:
    text = m.string
    if "fish:" in text:
        source, extra = "shell", {"shell": "fish"}
    elif "process" in text.lower() and "terminated with signal" in text:
        source, extra = "torch.multiprocessing", {}
    else:
        source, extra = "log", {}
    return _base(source, signal=signal_name(m["sig"]), pid=_int(m["pid"]), **extra)


def _srun(m: re.Match) -> dict[str, Any] | None:
    what = m["what"].strip()
    extra = {"node": m["node"], "tasks": m["tasks"]}
    if what.lower().startswith("out of memory"):
        return _base("slurm", oom=True, signal="SIGKILL", message=what, **extra)
    if code := re.match(r"Exited with exit code (-?\d+)", what):
        return _exit_facts("slurm", code[1], **extra)
    if msg := re.fullmatch(_MSG_TAIL, what):
        return _base(
            "slurm",
            signal=_BASH_MESSAGES[msg["msg"]],
            core_dumped=bool(msg["core"]),
            message=msg["msg"],
            **extra,
        )
    return None


def _slurm_oom(m: re.Match) -> dict[str, Any]:
    return _base("slurm", oom=True, signal="SIGKILL", oom_kill_events=_int(m["n"]), step=m["step"])


def _slurm_mem_limit(m: re.Match) -> dict[str, Any]:
    return _base("slurm", oom=True, reason="memory-limit", step=m["scope"])


_SLURM_REASONS = {
    "TIME LIMIT": "time-limit",
    "NODE FAILURE": "node-failure",
    "PREEMPTION": "preemption",
    "JOB REQUEUE": "requeue",
}


def _slurm_cancelled(m: re.Match) -> dict[str, Any]:
    reason_text = (m["reason"] or "").strip()
    reason = _SLURM_REASONS.get(reason_text, reason_text.lower().replace(" ", "-") or "cancelled")
    # Slurm stops a cancelled or timed-out step with SIGTERM (then SIGKILL after KillWait);
    # after a node failure nothing is delivered to the tasks.
    signal = None if reason == "node-failure" else "SIGTERM"
    id_key = "job_id" if m["kind"] == "JOB" else "step"
    return _base(
        "slurm",
        signal=signal,
        imposed=True,
        sent_by="slurm",
        reason=reason,
        node=m["node"],
        **{id_key: m["id"]},
    )


def _k8s_oomkilled(m: re.Match) -> dict[str, Any]:
    code = re.search(r"Exit\s*Code:\s*(-?\d+)", m.string)
    return _base(
        "kubernetes",
        oom=True,
        signal="SIGKILL",
        reason="OOMKilled",
        exit_code=_int(code[1]) if code else None,
    )


def _k8s_exit_code(m: re.Match) -> dict[str, Any]:
    reason = re.search(r"Reason:\s*(\w+)", m.string)
    return _exit_facts("kubernetes", m["code"], reason=reason[1] if reason else None)


def _k8s_evicted(m: re.Match) -> dict[str, Any]:
    return _base("kubernetes", oom=True, reason="evicted")


def _docker_oom(m: re.Match) -> dict[str, Any]:
    return _base("docker", oom=True, signal="SIGKILL", reason="OOMKilled")


def _docker_exit(m: re.Match) -> dict[str, Any]:
    return _exit_facts("docker", m["code"], container=m.groupdict().get("container"))


# torchrun's failure summary is several lines; journald may have joined them into one, so the
# exitcode and the "Signal N (SIGX) received by PID" parts are read together when both are there.
_TORCHRUN_EXITCODE = re.compile(r"(?<![\w(])exitcode\s*:\s*(?P<code>-?\d+)\s*\(pid:\s*(?P<pid>\d+)\)")
_TORCHRUN_SIGNAL = re.compile(r"\bSignal (?P<num>\d+) \((?P<sig>SIG[A-Z0-9]+)\) received by PID (?P<pid>\d+)")


def _torchrun_exitcode(m: re.Match) -> dict[str, Any]:
    facts = _exit_facts(
        "torchrun", m["code"], pid=_int(m["pid"]), local_rank=_int(m.groupdict().get("rank"))
    )
    if (sig := _TORCHRUN_SIGNAL.search(m.string)) and facts["signal"] is None:
        facts["signal"] = signal_name(sig["sig"])
    return facts


def _torchrun_signal(m: re.Match) -> dict[str, Any]:
    facts = _base("torchrun", signal=signal_name(m["sig"]) or signal_name(int(m["num"])), pid=_int(m["pid"]))
    if code := _TORCHRUN_EXITCODE.search(m.string):
        facts["exit_code"] = int(code["code"])
    return facts


def _torchrun_closing(m: re.Match) -> dict[str, Any]:
    # torchrun tears down the healthy ranks after another rank failed: not this rank's fault.
    return _base(
        "torchrun", signal=signal_name(m["sig"]), pid=_int(m["pid"]), imposed=True, sent_by="torchrun"
    )


def _torchrun_agent_signal(m: re.Match) -> dict[str, Any]:
    # The launcher itself received a signal from outside (scheduler, user, OOM killer ...).
    return _base(
        "torchrun", signal=signal_name(int(m["num"])), pid=_int(m["pid"]), imposed=True,
        received_by="agent",
    )


def _mp_exit(m: re.Match) -> dict[str, Any]:
    return _exit_facts("torch.multiprocessing", m["code"], process_index=_int(m["idx"]))


def _dataloader(m: re.Match) -> dict[str, Any] | None:
    msg = m["msg"].strip()
    signal = _BASH_MESSAGES.get(msg) or signal_name(msg)
    if signal is None:
        return None
    pids = [int(p) for p in re.findall(r"\d+", m["pids"])]
    return _base("dataloader", signal=signal, message=msg, pid=pids[0] if pids else None,
                 subject="dataloader-worker")


def _python_died(m: re.Match) -> dict[str, Any]:
    return _base("python", signal=signal_name(m["sig"]), exit_code=-int(m["num"]))


def _python_status(m: re.Match) -> dict[str, Any]:
    return _exit_facts("python", m["code"])


def _system_exit(m: re.Match) -> dict[str, Any]:
    return _exit_facts("python", m["code"])


def _faulthandler(m: re.Match) -> dict[str, Any]:
    return _base("python-faulthandler", signal=_BASH_MESSAGES[m["msg"]], message=m["msg"])


def _failure_signal_handler(m: re.Match) -> dict[str, Any]:
    return _base("failure-signal-handler", signal=signal_name(m["sig"]), pid=_int(m["pid"]))


def _gdb(m: re.Match) -> dict[str, Any]:
    # "Program terminated with signal ..." is what gdb says when it opens a core file.
    return _base(
        "gdb",
        signal=signal_name(m["sig"]),
        core_dumped=m["how"] != "received",
        message=(m["msg"] or "").strip() or None,
    )


def _lldb(m: re.Match) -> dict[str, Any]:
    return _base("lldb", signal=signal_name(m["sig"]))


def _ide(m: re.Match) -> dict[str, Any]:
    facts = _exit_facts("ide", m["code"])
    if m["sig"]:
        facts["signal"] = signal_name(m["sig"])
    return facts


def _make(m: re.Match) -> dict[str, Any]:
    if m["code"]:
        return _exit_facts("make", m["code"], target=m["target"])
    return _base(
        "make",
        signal=_BASH_MESSAGES[m["msg"]],
        core_dumped=bool(m["core"]),
        message=m["msg"],
        target=m["target"],
    )


def _timeout_core(m: re.Match) -> dict[str, Any]:
    return _base("shell", core_dumped=True, message="the monitored command dumped core")


def _generic_exit(m: re.Match) -> dict[str, Any] | None:
    text = m.string
    if not -64 <= int(m["code"]) <= 255:  # an HTTP status or a count, not a process exit code
        return None
    if "srun" in text or "slurm" in text.lower():
        source = "slurm"
    elif "Process completed with exit code" in text:
        source = "ci"
    else:
        source = "log"
    return _exit_facts(source, m["code"])


# --------------------------------------------------------------------------------- rules

_Builder = Callable[[re.Match], "dict[str, Any] | None"]
# "... 2.45it/s]Killed": the shell's message lands after a progress bar that left no newline.
_PROGRESS_TAIL = re.compile(rf"(?:[\]|]|it/s|s/it)\s*{_MSG_TAIL}\s*$")
_TAIL_CHARS = 160

# (substrings of which one must be present -- None: always try, pattern, builder).
# First rule that matches and builds facts wins, so specific rules come before generic ones.
_RULES: tuple[tuple[tuple[str, ...] | None, re.Pattern, _Builder], ...] = (
    # --- Slurm
    (("srun:",), re.compile(
        r"srun: error: (?P<node>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\]]+): (?P<what>.+?)\s*$"), _srun),
    (("oom", "OOM"), re.compile(
        r"Detected (?P<n>\d+) oom[-_ ]kill event(?:s|\(s\))? in (?:StepId=|step )?(?P<step>[\w.+]+?)[.,]?(?=\s|$)",
        re.I), _slurm_oom),
    (("Exceeded",), re.compile(r"slurmstepd: error: Exceeded (?P<scope>job|step) memory limit"),
     _slurm_mem_limit),
    (("CANCELLED",), re.compile(
        r"\*\*\*\s*(?P<kind>JOB|STEP) (?P<id>[\w.+]+) ON (?P<node>\S+) CANCELLED AT (?P<time>\S+)"
        r"(?: DUE TO (?P<reason>[A-Z][A-Z ]*?))?\s*(?:\*\*\*|$)"), _slurm_cancelled),
    # --- torchrun / torch.distributed.elastic / torch.multiprocessing
    (("closing signal",), re.compile(
        r"Sending process (?P<pid>\d+) closing signal (?P<sig>SIG[A-Z0-9]+)"), _torchrun_closing),
    (("received by PID",), _TORCHRUN_SIGNAL, _torchrun_signal),
    (("got signal",), re.compile(r"SignalException: Process (?P<pid>\d+) got signal: (?P<num>\d+)"),
     _torchrun_agent_signal),
    (("exitcode",), re.compile(
        r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<rank>\d+) \(pid: (?P<pid>\d+)\)"),
     _torchrun_exitcode),
    (("exitcode",), _TORCHRUN_EXITCODE, _torchrun_exitcode),
    (("terminated with exit code",), re.compile(
        r"process (?P<idx>\d+) terminated with exit code (?P<code>-?\d+)"), _mp_exit),
    # --- Python
    (("killed by signal",), re.compile(
        r"DataLoader worker \(pids?(?:\(s\))? (?P<pids>[\d, ]+)\) is killed by signal: (?P<msg>[^.]+)"),
     _dataloader),
    (("died with <Signals",), re.compile(r"died with <Signals\.(?P<sig>SIG[A-Z0-9]+): (?P<num>\d+)>"),
     _python_died),
    (("non-zero exit status",), re.compile(r"returned non-zero exit status (?P<code>-?\d+)"),
     _python_status),
    (("SystemExit",), re.compile(r"^\s*SystemExit: (?P<code>-?\d+)\s*$"), _system_exit),
    (("Fatal Python error",), re.compile(rf"Fatal Python error: (?P<msg>{_BASH_ALT})\b"), _faulthandler),
    (("received",), re.compile(
        r"\*\*\*\s*(?P<sig>SIG[A-Z0-9]+) (?:\(@0x[0-9a-fA-F]+\) received by PID (?P<pid>\d+)|received at time=)"),
     _failure_signal_handler),
    # --- debuggers
    (("Program received signal", "Program terminated with signal"), re.compile(
        r"Program (?P<how>received|terminated with) signal (?P<sig>SIG[A-Z0-9]+)(?:, (?P<msg>[^.]+))?"), _gdb),
    (("stop reason = signal",), re.compile(r"stop reason = signal (?P<sig>SIG[A-Z0-9]+)"), _lldb),
    (("Process finished with exit code",), re.compile(
        r"Process finished with exit code (?P<code>-?\d+)"
        r"(?: \(interrupted by signal (?P<num>\d+):\s*(?P<sig>SIG[A-Z0-9]+)\))?"), _ide),
    # --- Kubernetes / Docker
    (("OOMKilled",), re.compile(r"(?<![\"'\w])OOMKilled(?![\"'\w])"), _k8s_oomkilled),
    (("Exit Code",), re.compile(r"\bExit Code:\s*(?P<code>-?\d+)\b"), _k8s_exit_code),
    (("low on resource: memory",), re.compile(r"The node was low on resource: memory"), _k8s_evicted),
    (("OOMKilled",), re.compile(r'"OOMKilled":\s*true'), _docker_oom),
    (("ExitCode",), re.compile(r'"ExitCode":\s*(?P<code>-?\d+)'), _docker_exit),
    (("exited with code",), re.compile(r"^\s*(?P<container>[\w.\-]+)\s+exited with code (?P<code>-?\d+)\s*$"),
     _docker_exit),
    # --- make
    (("***",), re.compile(
        rf"make(?:\[\d+\])?: \*\*\* \[(?P<target>[^\]]*)\] "
        rf"(?:Error (?P<code>\d+)|(?P<msg>{_BASH_ALT})(?:\s*(?P<core>{_CORE}))?)"), _make),
    # --- shells
    (("zsh:",), re.compile(
        rf"^\s*zsh: (?P<zmsg>{_ZSH_ALT})(?:\s+(?P<core>\(core dumped\)))?(?:\s+(?P<cmd>.*?))?\s*$"),
     _zsh_message),
    (("[",), re.compile(
        rf"^\s*\[\d+\]\s*[+-]?\s+(?:(?P<pid>\d+)\s+)?"
        rf"(?:(?P<msg>{_BASH_ALT})|(?<=\d\s+)(?P<zmsg>{_ZSH_ALT}))"
        rf"(?:\s*(?P<core>{_CORE}))?(?:\s+(?P<cmd>\S.*?))?\s*$"), _job_line),
    (None, re.compile(
        rf"^(?P<script>\S+): \S+ (?P<lineno>\d+):\s+(?P<pid>\d+)\s+{_MSG_TAIL}(?:\s+(?P<cmd>\S.*?))?\s*$"),
     _bash_message),
    # the same report glued to the end of output that left no newline ("…safetensors run.sh: line 9: 42 Killed …")
    ((": line ",), re.compile(
        rf"(?<=\s|^)(?P<script>\S+): line (?P<lineno>\d+):\s+(?P<pid>\d+)\s+{_MSG_TAIL}(?:\s+(?P<cmd>\S.*?))?\s*$"),
     _bash_message),
    # "(core dumped)" makes the shell's signal text unambiguous even when glued to other output
    (("core dumped",), re.compile(rf"(?P<msg>{_BASH_ALT})\s*(?P<core>\(core dumped\))\s*$"), _bash_message),
    (None, re.compile(rf"^\s*{_MSG_TAIL}\s*$"), _bash_message),
    (None, _PROGRESS_TAIL, _bash_message),
    (("terminated",), re.compile(
        r"terminated (?:by|with) signal (?P<sig>SIG[A-Z0-9]+)(?:.*?\bpid[:= ]+(?P<pid>\d+))?"),
     _terminated_by_signal),
    (("dumped core",), re.compile(r"timeout: the monitored command dumped core"), _timeout_core),
    # --- anything else that states an exit code
    (("exit", "Exit", "EXIT", "return"), re.compile(
        r"\b(?:exit(?:ed)?(?: with)?[\s_]?(?:code|status)|return[\s_]?code|returncode)\s*[:=]?\s*"
        r"(?P<code>-?\d+)\b", re.I), _generic_exit),
)


# Which rules a needle lets through, so a line is only tried against its candidate rules.
_UNNEEDLED: tuple[int, ...] = tuple(i for i, (needles, _, _) in enumerate(_RULES) if needles is None)
_RULES_BY_NEEDLE: tuple[tuple[str, tuple[int, ...]], ...] = tuple(
    (needle, tuple(i for i, (needles, _, _) in enumerate(_RULES) if needles and needle in needles))
    for needle in sorted({n for needles, _, _ in _RULES for n in needles or ()})
)


def parse_outcome(line: Line) -> Evidence | None:
    """How a process ended, if this line says so, as Evidence(kind="outcome"); else None."""
    text = line.text
    chosen = set(_UNNEEDLED)
    for needle, rule_indexes in _RULES_BY_NEEDLE:
        if needle in text:
            chosen.update(rule_indexes)
    for _, pattern, build in (_RULES[i] for i in sorted(chosen)):
        if pattern is _PROGRESS_TAIL:
            # Anchored at the end of the line: only its last characters can match.
            m = pattern.search(text, max(0, len(text.rstrip()) - _TAIL_CHARS))
        else:
            m = pattern.search(text)
        if m is None:
            continue
        facts = build(m)
        if facts is not None:
            code = facts.get("exit_code")
            # failed: the process ended badly (a signal, or a non-zero exit status)
            facts["failed"] = bool(facts.get("signal")) or (isinstance(code, int) and code != 0)
            return Evidence(kind="outcome", text=text, loc=line.loc, facts=facts)
    return None


def link_outcomes(outcomes: list[Evidence]) -> list[Evidence]:
    """Outcomes of one log read together: a process that a launcher sent a signal to ("Sending
    process 1122 closing signal SIGTERM") ended of that signal, not of its own fault, so its
    other outcomes (torchrun's "exitcode: -15 (pid: 1122)", "Signal 15 (SIGTERM) received by PID
    1122") get imposed=True and sent_by from the line that sent it."""
    from dataclasses import replace

    sent = {e.facts["pid"]: e for e in outcomes
            if e.facts.get("imposed") and e.facts.get("sent_by") and e.facts.get("pid") is not None}
    if not sent:
        return outcomes
    out = []
    for e in outcomes:
        by = sent.get(e.facts.get("pid"))
        if by is not None and by is not e and not e.facts.get("imposed") and (
                e.facts.get("signal") in (None, by.facts.get("signal"))):
            e = replace(e, facts={**e.facts, "imposed": True, "sent_by": by.facts["sent_by"],
                                  "imposed_at": str(by.loc)})
        out.append(e)
    return out
