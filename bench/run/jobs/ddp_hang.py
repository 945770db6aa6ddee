# Two NCCL ranks; at step 4 rank 1 stays in its data loading (a sleep) while rank 0 enters the
# all-reduce: the watchdog times out (20 s), the Flight Recorder dumps every rank's collectives.
# With `mismatch`, rank 1 all-reduces a tensor of another size at step 3 instead.
import datetime, os, sys, time
import torch, torch.distributed as dist

mode = sys.argv[1] if len(sys.argv) > 1 else "hang"
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=20))
rank = dist.get_rank()
torch.cuda.set_device(rank)
w = torch.ones(1024, device="cuda")
for step in range(1, 8):
    if mode == "hang" and rank == 1 and step == 4:
        print(f"rank {rank} step {step}: loading the next shard", flush=True)
        time.sleep(600)
    n = 2048 if (mode == "mismatch" and rank == 1 and step == 3) else 1024
    t = torch.ones(n, device="cuda") * (rank + 1)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    w += t[:1024]
    print(f"rank {rank} step {step}: sum {w.sum().item():.0f}", flush=True)
dist.destroy_process_group()
