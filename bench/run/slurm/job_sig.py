"""Diagnostic variant of job.py: the same 0.2 s loop, but stop signals are blocked and taken with
sigtimedwait, so each one is printed with the pid and name of its SENDER (slurmstepd or
crashlens). 2 s after the first one it ends by that signal (default action), like job.py would."""
import os
import signal
import time

STOPS = {signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGINT}


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def main() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    first = None
    i = 0
    while True:
        print(f"step {i} pid {os.getpid()} t={time.time():.2f}", flush=True)
        i += 1
        info = signal.sigtimedwait(STOPS, 0.2)
        if info is not None:
            name = signal.Signals(info.si_signo).name
            print(f"got {name} at t={time.time():.2f} from pid {info.si_pid} ({comm(info.si_pid)})", flush=True)
            if first is None:
                first = (info.si_signo, time.monotonic())
        if first is not None and time.monotonic() - first[1] > 2.0:
            print(f"ending by {signal.Signals(first[0]).name}", flush=True)
            signal.signal(first[0], signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
            os.kill(os.getpid(), first[0])
            time.sleep(1)


if __name__ == "__main__":
    main()
