import datetime
import torch
import torch.distributed as dist
import torch.nn as nn
from common import log


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.cuda.set_device(0)
    emb = nn.Embedding(1000, 64).cuda()
    for step in range(20):
        ids = torch.randint(0, 1000, (32,), device="cuda")
        if rank == 1 and step == 4:
            ids[0] = 1000 + rank          # a token id from a larger vocabulary on this rank's shard
        loss = emb(ids).pow(2).mean()
        loss.backward()
        g = emb.weight.grad.cpu()
        dist.all_reduce(g)
        log.info("rank %d step %d loss %.4f", rank, step, loss.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
