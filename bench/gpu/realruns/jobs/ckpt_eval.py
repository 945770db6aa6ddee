import sys
import torch
from common import ConvNet, log


def load_model(path):
    model = ConvNet()
    state = torch.load(path)
    model.load_state_dict(state["model"])
    return model


def main():
    if sys.argv[1] == "save":
        model = ConvNet().cuda()
        torch.save({"model": model.state_dict(), "step": 1000}, "best.pt")
        log.info("saved best.pt")
        return
    model = load_model("best.pt")
    log.info("evaluating on %s", "cpu")


if __name__ == "__main__":
    main()
