import torch
from torch.utils.data import DataLoader, Dataset
from common import log


class GpuAugmented(Dataset):
    def __init__(self):
        self.noise = torch.randn(3, 32, 32, device="cuda")   # precomputed on the GPU

    def __len__(self):
        return 256

    def __getitem__(self, i):
        return torch.randn(3, 32, 32, device="cuda") + self.noise


def main():
    loader = DataLoader(GpuAugmented(), batch_size=32, num_workers=2)
    for step, x in enumerate(loader):
        log.info("step %d mean %.3f", step, x.mean().item())


if __name__ == "__main__":
    main()
