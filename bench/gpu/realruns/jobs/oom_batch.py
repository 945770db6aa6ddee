import argparse
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from tqdm import tqdm
from common import ConvNet, RandomImages, log


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--image-size", type=int, default=512)
    args = p.parse_args()
    log.info("config: %s", vars(args))
    model = ConvNet(width=128).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = RandomImages(n=4 * args.batch_size, size=args.image_size)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
    for epoch in range(3):
        for batch in tqdm(loader, desc=f"epoch {epoch}"):
            x, y = batch["image"].cuda(), batch["label"].cuda()
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
