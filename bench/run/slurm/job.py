"""A small loop printing a line every 0.2 s until it is stopped (crashlens' Slurm recipe try)."""
import os
import time


def step(i: int) -> None:
    print(f"step {i} pid {os.getpid()} t={time.time():.2f}", flush=True)
    time.sleep(0.2)


def main() -> None:
    i = 0
    while True:
        step(i)
        i += 1


if __name__ == "__main__":
    main()
