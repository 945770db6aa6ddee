"""One training script, several ways to misconfigure it (argv[1])."""
import sys
import torch
import torch.nn.functional as F
from common import ConvNet, log

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"


def get_device(cfg):
    return torch.device(cfg["device"])


def train_step(model, opt, x, y, scaler=None):
    if MODE == "autocast":
        with torch.autocast("cuda", dtype=torch.float16):
            h = model.features(x).flatten(1)
        logits = h @ model.head.weight.t().float() + model.head.bias
        logits = torch.addmm(model.head.bias, h, model.head.weight.t())
    else:
        logits = model(x)
    loss = F.cross_entropy(logits, y)
    if MODE == "anomaly":
        loss = loss + torch.log(logits.softmax(-1)[:, 0] - 1.0).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def main():
    cfg = {"device": "cuda:1" if MODE == "ordinal" else "cuda", "lr": 0.1}
    if MODE == "anomaly":
        torch.autograd.set_detect_anomaly(True)
    device = get_device(cfg)
    model = ConvNet().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    for step in range(20):
        x = torch.randn(16, 3, 32, 32)
        y = torch.randint(0, 10, (16,))
        if MODE != "device-mismatch":
            x = x.to(device)
        y = y.to(device)
        loss = train_step(model, opt, x, y)
        if step % 5 == 0:
            log.info("step %d loss %.4f", step, loss.item())
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
