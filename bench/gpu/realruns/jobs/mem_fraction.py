import torch
import torch.nn.functional as F
from common import ConvNet, log


def main():
    # share the GPU with the inference server: take at most 2 % of it
    torch.cuda.set_per_process_memory_fraction(0.02)
    model = ConvNet(width=256).cuda()
    opt = torch.optim.Adam(model.parameters())
    for step in range(10):
        x = torch.randn(256, 3, 128, 128, device="cuda")
        y = torch.randint(0, 10, (256,), device="cuda")
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
