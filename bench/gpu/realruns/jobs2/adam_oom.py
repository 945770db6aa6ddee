import torch
import torch.nn as nn
from common import log


def build(width, depth):
    return nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)]).cuda()


def main():
    torch.cuda.set_per_process_memory_fraction(0.1)
    model = build(8192, 40)
    opt = torch.optim.Adam(model.parameters())
    log.info("parameters: %.1fM", sum(p.numel() for p in model.parameters()) / 1e6)
    for step in range(3):
        x = torch.randn(64, 8192, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.info("step %d loss %.3f", step, loss.item())


if __name__ == "__main__":
    main()
