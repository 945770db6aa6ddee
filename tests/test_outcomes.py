"""parse_outcome: how a process ended, as shells, schedulers and launchers print it."""

from __future__ import annotations

import pytest

from crashlens.model import Line, Loc
from crashlens.parsers.outcomes import parse_outcome, signal_from_exit_code, signal_name


def oline(text: str, n: int = 7) -> Line:
    return Line(loc=Loc("job.out", n), text=text)


def facts(text: str) -> dict:
    ev = parse_outcome(oline(text))
    assert ev is not None, f"expected an outcome: {text!r}"
    assert ev.kind == "outcome"
    assert ev.text == text
    f = dict(ev.facts)
    for key in ("signal", "exit_code", "core_dumped", "oom", "source"):
        assert key in f, key
    return f


# --------------------------------------------------------------------------- helpers


def test_signal_from_exit_code_conventions():
    assert signal_from_exit_code(137) == "SIGKILL"
    assert signal_from_exit_code(139) == "SIGSEGV"
    assert signal_from_exit_code(134) == "SIGABRT"
    assert signal_from_exit_code(132) == "SIGILL"
    assert signal_from_exit_code(-9) == "SIGKILL"
    assert signal_from_exit_code(-11) == "SIGSEGV"
    assert signal_from_exit_code(1) is None
    assert signal_from_exit_code(128) is None
    assert signal_from_exit_code(255) is None
    assert signal_from_exit_code(None) is None


def test_signal_name_forms():
    assert signal_name(4) == "SIGILL"
    assert signal_name("KILL") == "SIGKILL"
    assert signal_name("sigsegv") == "SIGSEGV"
    assert signal_name("SIGIOT") == "SIGABRT"
    assert signal_name("SIGNOPE") is None


# ------------------------------------------------------------------- bash, English


@pytest.mark.parametrize(
    "text, signal, core",
    [
        ("Illegal instruction (core dumped)", "SIGILL", True),
        ("Segmentation fault (core dumped)", "SIGSEGV", True),
        ("Segmentation fault", "SIGSEGV", False),
        ("Aborted (core dumped)", "SIGABRT", True),
        ("Bus error (core dumped)", "SIGBUS", True),
        ("Bus error", "SIGBUS", False),
        ("Floating point exception", "SIGFPE", False),
        ("Floating point exception (core dumped)", "SIGFPE", True),
        ("Killed", "SIGKILL", False),
        ("Terminated", "SIGTERM", False),
        ("Trace/breakpoint trap (core dumped)", "SIGTRAP", True),
        ("CPU time limit exceeded", "SIGXCPU", False),
        ("  Killed  ", "SIGKILL", False),
    ],
)
def test_bash_messages(text, signal, core):
    f = facts(text)
    assert f["signal"] == signal
    assert f["core_dumped"] is core
    assert f["source"] == "shell"
    assert f["exit_code"] is None
    assert f["oom"] is False


def test_killed_after_progress_bar():
    f = facts("Epoch 3:  41%|████      | 205/500 [01:23<02:00,  2.45it/s, loss=0.231]Killed")
    assert f["signal"] == "SIGKILL"
    assert f["source"] == "shell"


def test_killed_after_progress_bar_with_space():
    f = facts("Loading checkpoint shards:  50%|█████     | 1/2 [00:10<00:10, 10.52s/it] Killed")
    assert f["signal"] == "SIGKILL"


def test_segfault_after_progress_bar():
    f = facts("100%|██████████| 8/8 [00:02<00:00,  3.41it/s]Segmentation fault (core dumped)")
    assert f["signal"] == "SIGSEGV"
    assert f["core_dumped"] is True


def test_bash_script_report_with_pid_and_command():
    f = facts("./train.sh: line 12: 48213 Killed                  python train.py --epochs 10")
    assert f["signal"] == "SIGKILL"
    assert f["pid"] == 48213
    assert f["command"] == "python train.py --epochs 10"
    assert f["script"] == "./train.sh"


def test_bash_script_report_with_core_dump():
    f = facts("/bin/bash: line 1: 991 Illegal instruction     (core dumped) python -c 'import torch'")
    assert f["signal"] == "SIGILL"
    assert f["core_dumped"] is True
    assert f["pid"] == 991
    assert f["command"] == "python -c 'import torch'"


def test_bash_job_notification():
    f = facts("[1]+  Killed                  python train.py --config big.yaml")
    assert f["signal"] == "SIGKILL"
    assert f["shell"] == "bash"
    assert f["command"] == "python train.py --config big.yaml"


# ---------------------------------------------------------------- bash, localised


@pytest.mark.parametrize(
    "text, signal, core",
    [
        # zh_CN
        ("已杀死", "SIGKILL", False),
        ("段错误 (核心已转储)", "SIGSEGV", True),
        ("非法指令 (核心已转储)", "SIGILL", True),
        ("已放弃 (核心已转储)", "SIGABRT", True),
        ("总线错误 (核心已转储)", "SIGBUS", True),
        ("浮点数例外", "SIGFPE", False),
        # ja
        ("強制終了", "SIGKILL", False),
        ("セグメンテーション違反です (コアダンプ)", "SIGSEGV", True),
        ("不正な命令です (コアダンプ)", "SIGILL", True),
        ("中止 (コアダンプ)", "SIGABRT", True),
        # de
        ("Getötet", "SIGKILL", False),
        ("Speicherzugriffsfehler (Speicherabzug geschrieben)", "SIGSEGV", True),
        ("Ungültiger Maschinenbefehl (Speicherabzug geschrieben)", "SIGILL", True),
        ("Abgebrochen (Speicherabzug geschrieben)", "SIGABRT", True),
        # fr
        ("Processus arrêté", "SIGKILL", False),
        ("Erreur de segmentation (core dumped)", "SIGSEGV", True),
        ("Instruction non permise", "SIGILL", False),
        ("Abandon (core dumped)", "SIGABRT", True),
        # es
        ("Terminado (killed)", "SIGKILL", False),
        ("Violación de segmento (`core' generado)", "SIGSEGV", True),
        ("Instrucción ilegal (`core' generado)", "SIGILL", True),
        ("Abortado (`core' generado)", "SIGABRT", True),
        # ru
        ("Убито", "SIGKILL", False),
        ("Ошибка сегментирования (стек памяти сброшен на диск)", "SIGSEGV", True),
        ("Недопустимая инструкция (стек памяти сброшен на диск)", "SIGILL", True),
        ("Аварийный останов (стек памяти сброшен на диск)", "SIGABRT", True),
    ],
)
def test_localised_bash_messages(text, signal, core):
    f = facts(text)
    assert f["signal"] == signal
    assert f["core_dumped"] is core
    assert f["source"] == "shell"


def test_localised_script_report():
    f = facts("./run.sh: 行 7: 48213 段错误               (核心已转储) python infer.py")
    assert f["signal"] == "SIGSEGV"
    assert f["core_dumped"] is True
    assert f["pid"] == 48213
    assert f["command"] == "python infer.py"


# ------------------------------------------------------------------------- zsh, fish


@pytest.mark.parametrize(
    "text, signal, pid, command",
    [
        ("[1]    27331 segmentation fault  python x.py", "SIGSEGV", 27331, "python x.py"),
        ("[2]  + 8812 killed     python train.py", "SIGKILL", 8812, "python train.py"),
        ("zsh: illegal hardware instruction  python", "SIGILL", None, "python"),
        ("zsh: killed     python train.py --bf16", "SIGKILL", None, "python train.py --bf16"),
        ("zsh: abort      python run.py", "SIGABRT", None, "python run.py"),
        ("zsh: bus error  python loader.py", "SIGBUS", None, "python loader.py"),
    ],
)
def test_zsh_messages(text, signal, pid, command):
    f = facts(text)
    assert f["signal"] == signal
    assert f["shell"] == "zsh"
    assert f.get("pid") == pid
    assert f["command"] == command


def test_zsh_core_dumped():
    f = facts("zsh: segmentation fault (core dumped)  python x.py")
    assert f["signal"] == "SIGSEGV"
    assert f["core_dumped"] is True


def test_fish_terminated_by_signal():
    f = facts("fish: Job 1, 'python x.py' terminated by signal SIGSEGV (Address boundary error)")
    assert f["signal"] == "SIGSEGV"
    assert f["shell"] == "fish"


# ------------------------------------------------------------------------ exit codes


@pytest.mark.parametrize(
    "text, code, signal",
    [
        ("Training script failed with exit code 137", 137, "SIGKILL"),
        ("job step exited with code 139", 139, "SIGSEGV"),
        ("worker returned exit status 1", 1, None),
        ("Process completed with exit code 143.", 143, "SIGTERM"),
        ("returncode=-11", -11, "SIGSEGV"),
        ("exit code: 0", 0, None),
    ],
)
def test_generic_exit_codes(text, code, signal):
    f = facts(text)
    assert f["exit_code"] == code
    assert f["signal"] == signal


def test_python_called_process_error_status():
    f = facts(
        "subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 134."
    )
    assert f["exit_code"] == 134
    assert f["signal"] == "SIGABRT"
    assert f["source"] == "python"


def test_python_called_process_error_negative_status():
    f = facts("subprocess.CalledProcessError: Command 'nvcc -V' returned non-zero exit status -9.")
    assert f["exit_code"] == -9
    assert f["signal"] == "SIGKILL"


def test_python_called_process_error_died_with_signal():
    f = facts("subprocess.CalledProcessError: Command '['./bench']' died with <Signals.SIGILL: 4>.")
    assert f["signal"] == "SIGILL"
    assert f["exit_code"] == -4


def test_ide_exit_code_with_signal():
    f = facts("Process finished with exit code 132 (interrupted by signal 4: SIGILL)")
    assert f["exit_code"] == 132
    assert f["signal"] == "SIGILL"
    assert f["source"] == "ide"


def test_docker_compose_exit():
    f = facts("trainer-1 exited with code 137")
    assert f["source"] == "docker"
    assert f["exit_code"] == 137
    assert f["signal"] == "SIGKILL"
    assert f["container"] == "trainer-1"


def test_make_error_code():
    f = facts("make: *** [Makefile:31: train] Error 139")
    assert f["source"] == "make"
    assert f["exit_code"] == 139
    assert f["signal"] == "SIGSEGV"


# ----------------------------------------------------------------------------- Slurm


def test_slurm_oom_kill_event():
    f = facts(
        "slurmstepd: error: Detected 1 oom_kill event in StepId=884213.0. Some of the step tasks "
        "have been OOM Killed."
    )
    assert f["oom"] is True
    assert f["signal"] == "SIGKILL"
    assert f["source"] == "slurm"
    assert f["step"] == "884213.0"
    assert f["oom_kill_events"] == 1


def test_slurm_older_oom_kill_wording():
    f = facts(
        "slurmstepd: error: Detected 2 oom-kill event(s) in step 1201.batch cgroup. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler."
    )
    assert f["oom"] is True
    assert f["oom_kill_events"] == 2
    assert f["step"] == "1201.batch"


def test_slurm_time_limit():
    f = facts("slurmstepd: error: *** JOB 884213 ON gpu-a017 CANCELLED AT 2025-02-11T04:12:55 DUE TO TIME LIMIT ***")
    assert f["source"] == "slurm"
    assert f["reason"] == "time-limit"
    assert f["signal"] == "SIGTERM"
    assert f["imposed"] is True
    assert f["job_id"] == "884213"
    assert f["node"] == "gpu-a017"


def test_slurm_node_failure():
    f = facts("slurmstepd: error: *** STEP 884213.0 ON gpu-a017 CANCELLED AT 2025-02-11T04:12:55 DUE TO NODE FAILURE ***")
    assert f["reason"] == "node-failure"
    assert f["signal"] is None
    assert f["step"] == "884213.0"


def test_slurm_plain_cancel():
    f = facts("slurmstepd: error: *** JOB 1772 ON node04 CANCELLED AT 2025-01-30T10:00:01 ***")
    assert f["reason"] == "cancelled"
    assert f["imposed"] is True


def test_srun_out_of_memory():
    f = facts("srun: error: gpu-a017: task 0: Out Of Memory")
    assert f["oom"] is True
    assert f["source"] == "slurm"
    assert f["node"] == "gpu-a017"
    assert f["tasks"] == "0"


def test_srun_exit_code_and_signal():
    exited = facts("srun: error: gpu-a017: tasks 0-7: Exited with exit code 1")
    assert exited["exit_code"] == 1 and exited["signal"] is None
    assert exited["tasks"] == "0-7"
    seg = facts("srun: error: gpu-a018: task 5: Segmentation fault (core dumped)")
    assert seg["signal"] == "SIGSEGV" and seg["core_dumped"] is True
    killed = facts("srun: error: gpu-a018: task 3: Killed")
    assert killed["signal"] == "SIGKILL"


def test_slurm_memory_limit():
    f = facts("slurmstepd: error: Exceeded job memory limit")
    assert f["oom"] is True
    assert f["source"] == "slurm"


# ------------------------------------------------------------------------ Kubernetes


def test_k8s_last_state_collapsed():
    f = facts("Last State:     Terminated  Reason: OOMKilled  Exit Code: 137")
    assert f["oom"] is True
    assert f["exit_code"] == 137
    assert f["signal"] == "SIGKILL"
    assert f["source"] == "kubernetes"


def test_k8s_reason_line_and_pod_list():
    assert facts("      Reason:       OOMKilled")["oom"] is True
    assert facts("trainer-7d9f8b-x2kq   0/1     OOMKilled   3 (40s ago)   5m")["oom"] is True


def test_k8s_exit_code_line():
    f = facts("      Exit Code:    139")
    assert f["exit_code"] == 139
    assert f["signal"] == "SIGSEGV"
    assert f["source"] == "kubernetes"
    assert f["oom"] is False


def test_k8s_eviction():
    f = facts("Message: The node was low on resource: memory. Container trainer was using 61Gi, which exceeds its request of 32Gi.")
    assert f["oom"] is True
    assert f["reason"] == "evicted"


def test_docker_inspect_oom_flag():
    assert facts('        "OOMKilled": true,')["oom"] is True
    assert parse_outcome(oline('        "OOMKilled": false,')) is None


# --------------------------------------------------------- torchrun and friends


def test_torchrun_root_cause_exitcode():
    f = facts("  exitcode  : -9 (pid: 12345)")
    assert f["source"] == "torchrun"
    assert f["exit_code"] == -9
    assert f["signal"] == "SIGKILL"
    assert f["pid"] == 12345


def test_torchrun_failed_line():
    f = facts(
        "E0211 04:12:55.123000 140231 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: -11) local_rank: 3 (pid: 5150) of binary: /usr/bin/python3"
    )
    assert f["exit_code"] == -11
    assert f["signal"] == "SIGSEGV"
    assert f["local_rank"] == 3
    assert f["pid"] == 5150


def test_torchrun_signal_received():
    f = facts("  traceback : Signal 6 (SIGABRT) received by PID 5150")
    assert f["signal"] == "SIGABRT"
    assert f["pid"] == 5150
    assert f["source"] == "torchrun"


def test_torchrun_summary_joined_by_journald():
    # journald turns the summary's newlines (#012) into spaces: one line carries both parts.
    f = facts(
        "Root Cause (first observed failure): [0]:   time      : 2025-02-11_04:12:55   host      : gpu-a017"
        "   rank      : 3 (local_rank: 3)   exitcode  : -9 (pid: 5150)   error_file: <N/A>"
        "   traceback : Signal 9 (SIGKILL) received by PID 5150"
    )
    assert f["signal"] == "SIGKILL"
    assert f["exit_code"] == -9
    assert f["pid"] == 5150
    assert f["source"] == "torchrun"


def test_torchrun_closing_signal_is_imposed():
    f = facts(
        "W0211 04:12:55.120000 140231 torch/distributed/elastic/multiprocessing/api.py:897] "
        "Sending process 5151 closing signal SIGTERM"
    )
    assert f["signal"] == "SIGTERM"
    assert f["imposed"] is True
    assert f["sent_by"] == "torchrun"
    assert f["pid"] == 5151


def test_torchrun_agent_got_signal():
    f = facts("torch.distributed.elastic.multiprocessing.api.SignalException: Process 4410 got signal: 15")
    assert f["signal"] == "SIGTERM"
    assert f["imposed"] is True


def test_torch_multiprocessing_spawn():
    f = facts("torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL")
    assert f["signal"] == "SIGKILL"
    assert f["source"] == "torch.multiprocessing"
    exited = facts("torch.multiprocessing.spawn.ProcessRaisedException: process 0 terminated with exit code 1")
    assert exited["exit_code"] == 1


def test_dataloader_worker_killed():
    f = facts(
        "RuntimeError: DataLoader worker (pid 4567) is killed by signal: Bus error. It is possible "
        "that dataloader's workers are out of shared memory. Please try to raise your shared memory limit."
    )
    assert f["signal"] == "SIGBUS"
    assert f["source"] == "dataloader"
    assert f["pid"] == 4567
    killed = facts("RuntimeError: DataLoader worker (pid(s) 812, 813) is killed by signal: Killed. ")
    assert killed["signal"] == "SIGKILL"


def test_faulthandler_and_failure_signal_handler():
    fh = facts("Fatal Python error: Segmentation fault")
    assert fh["signal"] == "SIGSEGV"
    assert fh["source"] == "python-faulthandler"
    glog = facts("*** SIGSEGV (@0x0) received by PID 20211 (TID 0x7f3b2dfff640) from PID 0; stack trace: ***")
    assert glog["signal"] == "SIGSEGV"
    assert glog["pid"] == 20211
    absl = facts("*** SIGABRT received at time=1739247175 on cpu 12 ***")
    assert absl["signal"] == "SIGABRT"


def test_debuggers():
    gdb = facts("Program received signal SIGILL, Illegal instruction.")
    assert gdb["signal"] == "SIGILL"
    assert gdb["source"] == "gdb"
    assert gdb["core_dumped"] is False
    core = facts("Program terminated with signal SIGSEGV, Segmentation fault.")
    assert core["signal"] == "SIGSEGV"
    assert core["core_dumped"] is True  # gdb says "terminated" when it reads a core file
    lldb = facts("* thread #1, name = 'python3', stop reason = signal SIGILL: illegal instruction operand")
    assert lldb["signal"] == "SIGILL"
    assert lldb["source"] == "lldb"


def test_evidence_location():
    ev = parse_outcome(oline("Killed", 812))
    assert ev is not None
    assert ev.loc == Loc("job.out", 812)


# ------------------------------------------------------------------------- negatives


@pytest.mark.parametrize(
    "text",
    [
        "",
        "killed = 0",
        "the process was not killed",
        "KeyError: 'killed'",
        "KeyError: 'OOMKilled'",
        "Killed process 1234 (python) total-vm:1234kB, anon-rss:1000kB",
        "Worker was Killed",
        "Aborted!",
        "Checked 12 files, 3 Aborted",
        "Segmentation fault handler installed",
        "if the job is Killed we retry",
        "num_killed_workers: 0",
        '    "OOMKilled": false,',
        "HTTP return code 404",
        "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.",
        "zsh: command not found: python",
        "[1] 12345",
        "Epoch 3:  41%|████      | 205/500 [01:23<02:00,  2.45it/s]",
    ],
)
def test_not_outcomes(text):
    assert parse_outcome(oline(text)) is None
