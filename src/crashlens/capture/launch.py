"""Run a command unchanged while keeping what it prints.

    launch(argv, env, console, on_signal=..., poll=...) -> Exit

The child gets the same stdin; its stdout and stderr reach the same places as they would without
crashlens: where both are a terminal, through a pseudo-terminal of the same size (so colours,
progress-bar redraws and line buffering are what they are on the terminal), else through two
pipes copied to this process's stdout and stderr. Every byte is also given to `console` (the
bundle's log) with the time it arrived. The child runs in its own process group; where stdin is
the controlling terminal, that group is made the foreground one (as a shell does), so Ctrl-C and
Ctrl-Z reach the job as they would the bare command; signals sent to crashlens (a scheduler's
SIGTERM or SIGUSR1, a `kill`) are forwarded to the group. The exit status is the child's: its
code, or its signal raised again on this process.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import selectors
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
DRAIN_AFTER_EXIT = 1.0   # seconds to keep reading output of processes the child left behind


@dataclass
class Exit:
    pid: int
    code: int | None = None             # exit status, or None when a signal ended it
    signal: int | None = None
    core_dumped: bool = False
    received: list[tuple[float, str]] = field(default_factory=list)   # signals crashlens got: (offset s, name)
    started: float = 0.0                # time.time() at start
    duration: float = 0.0
    mode: str = ""                      # "pty" | "pipes"

    @property
    def status(self) -> int:
        """The shell's number for this ending: the code, or 128 + signal."""
        return self.code if self.code is not None else 128 + (self.signal or 0)


class _Terminal:
    """The controlling terminal on stdin, when this process owns its foreground."""

    def __init__(self) -> None:
        self.fd: int | None = None
        try:
            if os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp():
                self.fd = 0
        except OSError:
            self.fd = None

    def give(self, pgid: int) -> None:
        if self.fd is None:
            return
        old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(self.fd, pgid)
        except OSError:
            pass
        finally:
            signal.signal(signal.SIGTTOU, old)


def _winsize(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except BlockingIOError:
            time.sleep(0.001)
            continue
        except OSError:
            return False      # the reader went away (EPIPE): keep the bundle, stop echoing
        view = view[n:]
    return True


def launch(argv: Sequence[str], env: dict[str, str], console: Callable[[str, bytes, float], None],
           on_signal: Callable[[int, "Exit"], None] | None = None,
           poll: Callable[[], None] | None = None, poll_every: float = 1.0,
           on_start: Callable[[int], None] | None = None) -> Exit:
    """Run argv to its end. `console(stream, data, t)` gets every chunk ("tty", "stdout" or
    "stderr"; t in seconds since the start); `on_signal(sig, exit)` runs in the main loop when a
    forwarded signal arrives, before it is forwarded (the grace-time work); `poll()` every
    `poll_every` seconds while the child runs; `on_start(pid)` once it has started."""
    use_pty = os.isatty(1) and os.isatty(2)
    term = _Terminal()
    t0 = time.monotonic()
    ex = Exit(pid=0, started=time.time(), mode="pty" if use_pty else "pipes")
    pending: list[int] = []

    def remember(sig: int, _frame: object) -> None:
        pending.append(sig)

    old_handlers = {s: signal.signal(s, remember) for s in FORWARDED}
    if use_pty:
        old_handlers[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, remember)
    # every signal (the child's end included) wakes the loop at once through this pipe, so the
    # loop can sleep long between output chunks instead of polling
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    old_handlers[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, lambda _s, _f: None)
    fds: dict[int, str] = {}
    out_of: dict[str, int] = {"tty": 1, "stdout": 1, "stderr": 2}
    echo = {1: True, 2: True}
    try:
        if use_pty:
            master, slave = pty.openpty()
            size = _winsize(1)
            if size:
                fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
            attrs = termios.tcgetattr(slave)
            attrs[1] &= ~termios.OPOST        # pass the child's bytes through unchanged ("\n" stays "\n")
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
            proc = subprocess.Popen(list(argv), env=env, stdin=None, stdout=slave, stderr=slave,
                                    process_group=0, close_fds=True)
            os.close(slave)
            fds[master] = "tty"
        else:
            proc = subprocess.Popen(list(argv), env=env, stdin=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    process_group=0, close_fds=True, bufsize=0)
            assert proc.stdout is not None and proc.stderr is not None
            fds[proc.stdout.fileno()] = "stdout"
            fds[proc.stderr.fileno()] = "stderr"
        ex.pid = proc.pid
        term.give(proc.pid)
        if on_start is not None:
            on_start(proc.pid)
        sel = selectors.DefaultSelector()
        for fd in fds:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        sel.register(wake_r, selectors.EVENT_READ)
        ended_at: float | None = None
        next_poll = time.monotonic() + poll_every
        while fds:
            for key, _ in sel.select(timeout=0.1 if ended_at is not None else min(poll_every, 1.0)):
                fd = key.fd
                if fd == wake_r:
                    try:
                        while os.read(wake_r, 512):
                            pass
                    except OSError:
                        pass
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                except OSError as exc:          # EIO: the pty's last writer closed it
                    if exc.errno not in (errno.EIO, errno.EBADF):
                        raise
                    chunk = b""
                if not chunk:
                    sel.unregister(fd)
                    del fds[fd]
                    continue
                stream = fds[fd]
                console(stream, chunk, time.monotonic() - t0)
                out = out_of[stream]
                if echo[out]:
                    echo[out] = _write_all(out, chunk)
            while pending:
                sig = pending.pop(0)
                if sig == signal.SIGWINCH:
                    size = _winsize(1)
                    if size and "tty" in fds.values():
                        master_fd = next(fd for fd, s in fds.items() if s == "tty")
                        try:
                            fcntl.ioctl(master_fd, termios.TIOCSWINSZ, size)
                        except OSError:
                            pass
                    continue
                ex.received.append((round(time.monotonic() - t0, 3), signal.Signals(sig).name))
                if on_signal is not None:
                    on_signal(sig, ex)
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            if ended_at is None:
                status = _wait(proc.pid, term, os.getpgrp())
                if status is not None:
                    _set_status(ex, status)
                    ended_at = time.monotonic()
                elif poll is not None and time.monotonic() >= next_poll:
                    poll()
                    next_poll = time.monotonic() + poll_every
            elif time.monotonic() - ended_at > DRAIN_AFTER_EXIT:
                break
        if ended_at is None:       # output closed first: wait for the child itself
            while True:
                status = _wait(proc.pid, term, os.getpgrp(), block=True)
                if status is not None:
                    _set_status(ex, status)
                    break
        for fd in list(fds):
            try:
                os.close(fd)
            except OSError:
                pass
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
    finally:
        term.give(os.getpgrp())
        signal.set_wakeup_fd(old_wakeup)
        for s, h in old_handlers.items():
            signal.signal(s, h)
        for fd in (wake_r, wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
    ex.duration = round(time.monotonic() - t0, 3)
    return ex


def _wait(pid: int, term: _Terminal, own_pgrp: int, block: bool = False) -> int | None:
    """The child's wait status once it has ended; a stop (Ctrl-Z) stops crashlens too, as a shell
    would show it, and a continue continues the child."""
    while True:
        try:
            got, status = os.waitpid(pid, (0 if block else os.WNOHANG) | os.WUNTRACED)
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if got == 0:
            return None
        if os.WIFSTOPPED(status):
            term.give(own_pgrp)
            os.kill(os.getpid(), signal.SIGSTOP)
            term.give(pid)
            try:
                os.killpg(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            if not block:
                return None
            continue
        return status


def _set_status(ex: Exit, status: int) -> None:
    if os.WIFSIGNALED(status):
        ex.signal = os.WTERMSIG(status)
        ex.core_dumped = os.WCOREDUMP(status)
    else:
        ex.code = os.waitstatus_to_exitcode(status)


def exit_like(ex: Exit) -> None:
    """End this process as the child ended: the same code, or the same signal (without a core of
    crashlens itself)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if ex.signal:
        import resource
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        except (ValueError, OSError):
            pass
        try:
            signal.signal(ex.signal, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [ex.signal])
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), ex.signal)
        time.sleep(1)
    os._exit(ex.code if ex.code is not None else 128 + (ex.signal or 0))
