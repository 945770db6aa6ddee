import datetime
import os
import sys
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader
from common import ConvNet, RandomImages, log

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"


def collate(batch):
    return {"image": torch.stack([b["image"] for b in batch]), "label": torch.stack([b["target"] for b in batch])}


def main():
    backend = "gloo" if MODE != "dup-gpu" else "nccl"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.cuda.set_device(0)
    model = ConvNet().cuda()
    if MODE == "dup-gpu":
        t = torch.ones(1, device="cuda")
        dist.all_reduce(t)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(RandomImages(256), batch_size=32, num_workers=2,
                        collate_fn=collate if (MODE == "collate" and rank == 0) else None)
    for step, batch in enumerate(loader):
        x, y = batch["image"].cuda(), batch["label"].cuda()
        if MODE == "oom" and rank == 1 and step == 2:
            x = x.repeat(4096, 1, 8, 8)   # an augmentation that multiplies the batch
        loss = F.cross_entropy(model(x), y.repeat(x.shape[0] // y.shape[0]))
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        log.info("rank %d step %d loss %.4f", rank, step, loss.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
