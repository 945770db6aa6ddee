#!/usr/bin/env python3
"""Generate a large, realistic distributed-training log that ends in a CUDA crash.

    python bench/gen_log.py --size 1G -o /tmp/train-1g.log
    python bench/gen_log.py --size 64M --seed 7 > small.log

The content imitates what a torchrun job writes to its combined stdout/stderr:

* an ``nvidia-smi`` table and torchrun / NCCL start-up chatter (``NCCL INFO``
  bootstrap, channel and ring set-up lines for every rank),
* Python ``logging`` lines with timestamps, ANSI colour codes and ``[rankN]:``
  prefixes (per-step loss, learning rate, throughput, memory),
* tqdm progress bars as written to a file: one long line of ``\\r``
  overdraws with Unicode block characters,
* periodic ``UserWarning`` blocks, evaluation and checkpoint lines, NCCL
  watchdog / communicator lines,
* at the very end a ``[rank3]:`` Python traceback ending in
  ``RuntimeError: CUDA error: an illegal memory access was encountered`` and
  the usual PyTorch footer (``CUDA kernel errors might be asynchronously
  reported ...``, ``For debugging consider passing CUDA_LAUNCH_BLOCKING=1``,
  ``Compile with `TORCH_USE_CUDA_DSA` ...``); ``--torchrun-summary`` adds
  the torchrun ``ChildFailedError`` report after it.

Output is deterministic for a given ``--seed`` and ``--size`` and is written
in blocks of a few MiB; 1 GiB takes roughly 20-30 s on a small VM.
"""

from __future__ import annotations

import argparse
import random
import sys

RANKS = 8
HOST = "gpu-node-017"
PIDS = [48213 + i * 3 for i in range(RANKS)]
DATE = "2024-05-15"

GREEN, YELLOW, CYAN, BOLD, RESET = "\x1b[32m", "\x1b[33m", "\x1b[36m", "\x1b[1m", "\x1b[0m"

WARNINGS = [
    (
        "/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:429: UserWarning: "
        "torch.utils.checkpoint: please pass in use_reentrant=True or use_reentrant=False "
        "explicitly. The default value of use_reentrant will be updated to be False in the "
        "future. To maintain current behavior, pass use_reentrant=True. It is recommended "
        "that you use use_reentrant=False. Refer to docs for more details on the "
        "differences between the two variants."
    ),
    (
        "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py:1501: UserWarning: "
        "Using a target size (torch.Size([8, 1])) that is different to the input size "
        "(torch.Size([8])). This will likely lead to incorrect results due to broadcasting. "
        "Please ensure they have the same size."
    ),
    (
        "/opt/conda/lib/python3.10/site-packages/torch/optim/lr_scheduler.py:139: UserWarning: "
        "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 "
        "and later, you should call them in the opposite order: `optimizer.step()` before "
        "`lr_scheduler.step()`."
    ),
]

BAR = " ▏▎▍▌▋▊▉"


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    if text and text[-1] in "KMGT":
        mult = 1024 ** ("KMGT".index(text[-1]) + 1)
        text = text[:-1]
    return int(float(text) * mult)


class Clock:
    """Wall clock of the fake job, advanced by the generator."""

    def __init__(self, start_s: float):
        self.t = start_s

    def advance(self, dt: float) -> None:
        self.t += dt

    def stamp(self) -> str:
        t = int(self.t)
        ms = int((self.t - t) * 1000)
        d, t = divmod(t, 86400)
        h, t = divmod(t, 3600)
        m, s = divmod(t, 60)
        return f"{DATE[:8]}{15 + d:02d} {h:02d}:{m:02d}:{s:02d},{ms:03d}"


def nvidia_smi() -> list[str]:
    out = [
        "Wed May 15 09:12:03 2024       ",
        "+---------------------------------------------------------------------------------------+",
        "| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |",
        "|-----------------------------------------+----------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                      |               MIG M. |",
        "|=========================================+======================+======================|",
    ]
    buses = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
    for i in range(RANKS):
        out += [
            f"|   {i}  NVIDIA H100 80GB HBM3          On  | 00000000:{buses[i]}:00.0 Off |                    0 |",
            f"| N/A   {31 + i}C    P0              {68 + i * 2}W / 700W |      4MiB / 81559MiB |      0%      Default |",
            "|                                         |                      |             Disabled |",
            "+-----------------------------------------+----------------------+----------------------+",
        ]
    out += [
        "",
        "+---------------------------------------------------------------------------------------+",
        "| Processes:                                                                            |",
        "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |",
        "|        ID   ID                                                             Usage      |",
        "|=======================================================================================|",
        "|  No running processes found                                                           |",
        "+---------------------------------------------------------------------------------------+",
    ]
    return out


def nccl_prefix(rank: int, tid_off: int = 177) -> str:
    return f"{HOST}:{PIDS[rank]}:{PIDS[rank] + tid_off} [{rank}] NCCL INFO "


def startup(clock: Clock) -> list[str]:
    ts = f"[{clock.stamp()}] torch.distributed.run: [WARNING] "
    out = [
        ts,
        ts + "*****************************************",
        ts + "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, "
        "to avoid your system being overloaded, please further tune the variable for optimal "
        "performance in your application as needed. ",
        ts + "*****************************************",
    ]
    for r in range(RANKS):
        out.append(
            f"[rank{r}]: {clock.stamp()} - {GREEN}INFO{RESET} - train.py:88 - "
            f"Initialized process group: backend=nccl world_size={RANKS} rank={r} local_rank={r}"
        )
    for r in range(RANKS):
        p0 = f"{HOST}:{PIDS[r]}:{PIDS[r]} [{r}] NCCL INFO "
        p = nccl_prefix(r)
        out += [
            p0 + "Bootstrap : Using eth0:10.42.3.17<0>",
            p0 + "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such "
            "file or directory No plugin found (libnccl-net.so), using internal implementation",
            p0 + "cudaDriverVersion 12020",
        ]
        if r == 0:
            out.append("NCCL version 2.18.6+cuda12.1")
        out += [
            p + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; "
            "OOB eth0:10.42.3.17<0>",
            p + "Using network IB",
            p + f"comm 0x55d4c8a0{r:02x}f0 rank {r} nranks {RANKS} cudaDev {r} nvmlDev {r} "
            f"busId {r + 1}8000 commId 0x5c1a3e7f9b2d4c11 - Init START",
            p + "Setting affinity for GPU %d to ffffffff,00000000,ffffffff" % r,
        ]
        for c in range(0, 32, 4):
            out.append(p + f"Channel {c:02d}/32 :    " + "   ".join(str(x) for x in range(RANKS)))
        out += [
            p + f"Trees [0] {(r + 1) % RANKS}/-1/-1->{r}->{(r - 1) % RANKS} "
            f"[1] {(r + 1) % RANKS}/-1/-1->{r}->{(r - 1) % RANKS}",
            p + "P2P Chunksize set to 524288",
            p + "Connected all rings",
            p + "Connected all trees",
            p + "threadThresholds 8/8/64 | 64/8/64 | 512 | 512",
            p + "32 coll channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
            p + f"comm 0x55d4c8a0{r:02x}f0 rank {r} nranks {RANKS} cudaDev {r} nvmlDev {r} "
            f"busId {r + 1}8000 commId 0x5c1a3e7f9b2d4c11 - Init COMPLETE",
        ]
    clock.advance(7.5)
    out += [
        f"[rank0]: {clock.stamp()} - {GREEN}INFO{RESET} - train.py:141 - Model: LlamaForCausalLM "
        "(6.74B parameters, 32 layers, hidden 4096, 32 heads), dtype=bfloat16, FSDP FULL_SHARD",
        f"[rank0]: {clock.stamp()} - {GREEN}INFO{RESET} - train.py:150 - Dataset: 1,843,200 "
        "sequences of 4096 tokens, global batch 512, micro batch 8, grad accumulation 8",
        f"[rank0]: {clock.stamp()} - {GREEN}INFO{RESET} - train.py:163 - Optimizer: AdamW "
        "lr=3.0e-04 betas=(0.9, 0.95) wd=0.1, cosine schedule, warmup 2000 steps",
    ]
    return out


def tqdm_line(rng: random.Random, epoch: int, done: int, total: int, steps: int, it_s: float) -> str:
    """One file line of a tqdm bar: ``steps`` carriage-return overdraws."""
    parts = []
    for k in range(steps):
        n = min(total, done + k)
        frac = n / total
        width = 10 * frac
        full = int(width)
        bar = "█" * full
        if full < 10:
            bar += BAR[int((width - full) * 8)] + " " * (9 - full)
        el = int(n / it_s)
        rem = int((total - n) / it_s)
        loss = 2.0 + rng.random() * 0.5
        parts.append(
            f"Epoch {epoch}: {int(frac * 100):3d}%|{bar}| {n}/{total} "
            f"[{el // 60:02d}:{el % 60:02d}<{rem // 60:02d}:{rem % 60:02d}, {it_s:5.2f}it/s, "
            f"loss={loss:.3f}, lr=3e-4]"
        )
    return "\r" + "\r".join(parts)


def body_block(rng: random.Random, clock: Clock, state: dict, n_steps: int) -> list[str]:
    """Log lines for ``n_steps`` optimizer steps."""
    out: list[str] = []
    append = out.append
    step = state["step"]
    total = state["epoch_steps"]
    info = f"{GREEN}INFO{RESET}"
    warn = f"{YELLOW}WARNING{RESET}"
    rnd = rng.random
    for _ in range(n_steps):
        step += 1
        clock.advance(0.42 + rnd() * 0.05)
        stamp = clock.stamp()
        loss = 2.1 + 3.0 / (1 + step / 4000) + (rnd() - 0.5) * 0.2
        lr = 3e-4 * min(1.0, step / 2000)
        for r in range(0, RANKS, 2):
            append(
                f"[rank{r}]: {stamp} - {info} - train.py:412 - step {step}/250000 | "
                f"loss {loss + (rnd() - 0.5) * 0.01:.4f} | lr {lr:.3e} | grad_norm {0.8 + rnd():.3f} | "
                f"tok/s {int(41000 + rnd() * 3000) * RANKS} | mem {61 + rnd() * 4:.1f}GB"
            )
        if step % 5 == 0:
            in_epoch = step % total
            append(tqdm_line(rng, step // total, max(in_epoch - 4, 0), total, 5, 2.3 + rnd() * 0.2))
        if step % 40 == 0:
            r = int(rnd() * RANKS)
            append(
                f"[rank{r}]: {stamp} - {info} - data.py:77 - prefetch queue depth "
                f"{int(rnd() * 16)}, worker {int(rnd() * 8)} batch latency {rnd() * 30:.1f} ms"
            )
        if step % 300 == 0:
            r = int(rnd() * RANKS)
            w = WARNINGS[int(rnd() * len(WARNINGS))]
            append(f"[rank{r}]: {w}")
            append(f"[rank{r}]:   warnings.warn(")
        if step % 500 == 0:
            append(
                f"[rank0]: {stamp} - {info} - train.py:455 - {CYAN}eval{RESET} | step {step} | "
                f"val_loss {loss - 0.05:.4f} | ppl {2.718281828 ** (loss - 0.05):.2f} | "
                f"tokens seen {step * 512 * 4096:,}"
            )
        if step % 1000 == 0:
            append(
                f"[rank0]: {stamp} - {info} - checkpoint.py:203 - Saving checkpoint to "
                f"/checkpoints/llama7b-run42/step_{step:07d} (sharded, 8 ranks)"
            )
            append(
                f"[rank0]: {stamp} - {info} - checkpoint.py:231 - Checkpoint saved in "
                f"{20 + rnd() * 10:.1f}s"
            )
        if step % 2500 == 0:
            r = int(rnd() * RANKS)
            append(
                nccl_prefix(r, 1201)
                + f"comm 0x7f3a{r:02x}00b0 rank {r} nranks {RANKS} cudaDev {r} busId {r + 1}8000 "
                "commId 0x91ab3c55e0d2f7aa - Init COMPLETE"
            )
        if step % 4000 == 0:
            r = int(rnd() * RANKS)
            append(
                f"[rank{r}]: {stamp} - {warn} - train.py:431 - gradient overflow detected, "
                f"skipping step, loss scale reduced to {2 ** int(10 + rnd() * 6)}"
            )
    state["step"] = step
    return out


def crash(clock: Clock, step: int, torchrun_summary: bool) -> list[str]:
    clock.advance(0.3)
    r = 3
    p = f"[rank{r}]: "
    tb = [
        "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 612, in <module>',
        "    main()",
        '  File "/workspace/train.py", line 598, in main',
        "    loss = train_step(model, batch, optimizer, scaler)",
        '  File "/workspace/train.py", line 431, in train_step',
        "    scaler.scale(loss).backward()",
        '  File "/opt/conda/lib/python3.10/site-packages/torch/_tensor.py", line 522, in backward',
        "    torch.autograd.backward(",
        '  File "/opt/conda/lib/python3.10/site-packages/torch/autograd/__init__.py", line 266, in backward',
        "    Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    ]
    out = [
        f"[rank{r}]: {clock.stamp()} - {GREEN}INFO{RESET} - train.py:412 - step {step + 1}/250000 | "
        "loss 2.2871 | lr 3.000e-04 | grad_norm 1.044 | tok/s 335112 | mem 63.9GB",
    ]
    out += [p + line for line in tb]
    if torchrun_summary:
        clock.advance(31.0)
        stamp = clock.stamp().replace(" ", "_").replace(",", ".")
        out += [
            f"E0515 {stamp[11:]} 140213 torch/distributed/elastic/multiprocessing/api.py:826] "
            f"failed (exitcode: 1) local_rank: {r} (pid: {PIDS[r]}) of binary: /opt/conda/bin/python",
            "Traceback (most recent call last):",
            '  File "/opt/conda/bin/torchrun", line 8, in <module>',
            "    sys.exit(main())",
            '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/run.py", line 812, in main',
            "    run(args)",
            '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/launcher/api.py", line 263, in launch_agent',
            "    raise ChildFailedError(",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "============================================================",
            "train.py FAILED",
            "------------------------------------------------------------",
            "Failures:",
            "  <NO_OTHER_FAILURES>",
            "------------------------------------------------------------",
            "Root Cause (first observed failure):",
            "[0]:",
            f"  time      : {stamp[:19]}",
            f"  host      : {HOST}",
            f"  rank      : {r} (local_rank: {r})",
            f"  exitcode  : 1 (pid: {PIDS[r]})",
            "  error_file: <N/A>",
            "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
            "============================================================",
        ]
    return out


def generate(out, size: int, seed: int = 1234, torchrun_summary: bool = False) -> int:
    """Write about ``size`` bytes of log to the binary file ``out``; return bytes written."""
    rng = random.Random(seed)
    clock = Clock(9 * 3600 + 12 * 60 + 5.0)
    state = {"step": 0, "epoch_steps": 3600}
    written = 0

    def emit(lines: list[str]) -> None:
        nonlocal written
        if lines:
            data = ("\n".join(lines) + "\n").encode("utf-8")
            out.write(data)
            written += len(data)

    emit(nvidia_smi())
    emit(startup(clock))
    tail = ("\n".join(crash(Clock(0), 0, torchrun_summary)) + "\n").encode("utf-8")
    reserve = len(tail) + 512
    n_steps = 256
    while n_steps:
        left = size - reserve - written
        if left <= 0:
            break
        saved = (rng.getstate(), clock.t, state["step"])
        data = ("\n".join(body_block(rng, clock, state, n_steps)) + "\n").encode("utf-8")
        if len(data) > left:
            # too much: undo and retry with fewer steps (none once a step is too much)
            rng.setstate(saved[0])
            clock.t, state["step"] = saved[1], saved[2]
            n_steps //= 4
            continue
        out.write(data)
        written += len(data)
        if n_steps < 8192 and len(data) * 4 < left:
            n_steps *= 2
    emit(crash(clock, state["step"], torchrun_summary))
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G", help="approximate output size, e.g. 64M, 1G (default 1G)")
    ap.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    ap.add_argument("--seed", type=int, default=1234, help="random seed (default 1234)")
    ap.add_argument(
        "--torchrun-summary",
        action="store_true",
        help="append torchrun's ChildFailedError report after the crash",
    )
    args = ap.parse_args(argv)
    size = parse_size(args.size)
    if args.output == "-":
        n = generate(sys.stdout.buffer, size, args.seed, args.torchrun_summary)
        sys.stdout.buffer.flush()
    else:
        with open(args.output, "wb", buffering=8 << 20) as f:
            n = generate(f, size, args.seed, args.torchrun_summary)
    print(f"wrote {n} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
