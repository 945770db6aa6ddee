# Two ranks with gloo; rank 1 reads a shard that is missing at step 3.
import os, datetime, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
rank = dist.get_rank()
w = torch.zeros(4)
for step in range(1, 6):
    if rank == 1 and step == 3:
        open(f"/home/ml/regress/shards/part-{rank:03d}.bin", "rb").read()
    t = torch.ones(4) * rank
    dist.all_reduce(t)
    w += t
    print(f"rank {rank} step {step} sum {w.sum().item()}", flush=True)
dist.destroy_process_group()
