import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from tqdm import tqdm
from common import ConvNet, RandomImages, log

CLASSES = ["cat", "dog", "car", "ship", "plane", "frog", "horse", "bird", "deer", "truck", "other"]


class Labelled(RandomImages):
    def __getitem__(self, i):
        item = super().__getitem__(i)
        if i == 200:
            item["label"] = torch.tensor(CLASSES.index("other"))
        return item


def main():
    model = ConvNet(n_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Labelled(n=512), batch_size=32)
    for epoch in range(2):
        bar = tqdm(loader, desc=f"Epoch {epoch}", dynamic_ncols=False, ncols=100)
        for batch in bar:
            x, y = batch["image"].cuda(), batch["label"].cuda()
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            bar.set_postfix(loss=f"{loss.item():.3f}")
        log.info("epoch %d done", epoch)


if __name__ == "__main__":
    main()
