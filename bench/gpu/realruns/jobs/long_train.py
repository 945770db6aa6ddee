import time
import torch
import torch.nn.functional as F
from common import ConvNet, log


def main():
    model = ConvNet().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(100000):
        x = torch.randn(64, 3, 32, 32, device="cuda")
        y = torch.randint(0, 10, (64,), device="cuda")
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 200 == 0:
            log.info("step %d loss %.4f", step, loss.item())
        time.sleep(0.002)


if __name__ == "__main__":
    main()
