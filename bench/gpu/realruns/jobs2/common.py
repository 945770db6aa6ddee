"""Shared pieces of the jobs: a logger like a real training script's, a small model, fake data."""
import logging
import sys

import torch
import torch.nn as nn
from torch.utils.data import Dataset

logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                    format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
log = logging.getLogger("train")


class ConvNet(nn.Module):
    def __init__(self, n_classes=10, width=64):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width * 2, 3, padding=1), nn.BatchNorm2d(width * 2), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(width * 2, n_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class RandomImages(Dataset):
    def __init__(self, n=512, size=32, n_classes=10):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 3, size, size, generator=g)
        self.y = torch.randint(0, n_classes, (n,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"image": self.x[i], "label": self.y[i]}
