# Two gloo ranks. At step 3 rank 1 raises (a KeyError in its batch lookup) but a non-daemon
# uploader thread keeps its process alive; rank 0 waits in the all-reduce until gloo's timeout
# (20 s), fails, and exits first. (torchrun's "Root Cause (first observed failure)" still names
# rank 1 here: it is the earliest error file, which @record wrote when the KeyError left main.)
# Run: crashlens run -- torchrun --standalone --nproc_per_node=2 --log-dir BUNDLE/torchrun-logs train.py
import datetime, threading, time
import torch, torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def uploader():
    time.sleep(90)            # a metrics uploader that is not a daemon thread


@record
def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    rank = dist.get_rank()
    threading.Thread(target=uploader, name="uploader").start()
    batches = {1: [1.0], 2: [2.0]}
    w = torch.zeros(4)
    for step in range(1, 6):
        x = batches[step] if rank == 1 else [float(step)]
        t = torch.tensor(x * 4)
        dist.all_reduce(t)
        w += t
        print(f"rank {rank} step {step}: {w.sum().item():.1f}", flush=True)


if __name__ == "__main__":
    main()
