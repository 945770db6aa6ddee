import os
import torch
import torch.nn.functional as F
from common import ConvNet, log

CKPT_DIR = "/home/ml/runs/exp-17/checkpoints"


def save_emergency_checkpoint(model, step):
    path = os.path.join(CKPT_DIR, f"emergency-{step}.pt")
    with open(path, "wb") as f:
        torch.save(model.state_dict(), f)


def train(model, opt):
    for step in range(50):
        x = torch.randn(16, 3, 32, 32, device="cuda")
        y = torch.randint(0, 10, (16,), device="cuda")
        if step == 12:
            y[3] = -1
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            log.info("step %d loss %.4f", step, loss.item())


def main():
    model = ConvNet().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = 0
    try:
        train(model, opt)
    except Exception:
        log.error("training failed, writing an emergency checkpoint")
        save_emergency_checkpoint(model, step)
        raise


if __name__ == "__main__":
    main()
