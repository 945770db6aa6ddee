# A DataLoader with workers passing large batches through /dev/shm.
import torch
from torch.utils.data import DataLoader, Dataset

class Frames(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return torch.randn(3, 512, 512), i % 10

if __name__ == "__main__":
    loader = DataLoader(Frames(), batch_size=16, num_workers=2)
    for epoch in range(2):
        for step, (x, y) in enumerate(loader):
            print(f"epoch {epoch} step {step} batch {tuple(x.shape)}", flush=True)
