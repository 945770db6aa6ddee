import torch
from common import log


def gather_neighbours(features, neighbour_ids):
    return features.index_select(0, neighbour_ids.flatten()).view(*neighbour_ids.shape, -1)


def main():
    feats = torch.randn(10000, 128, device="cuda")
    ids = torch.randint(0, 10000, (512, 16), device="cuda")
    ids[100, 3] = 10000            # a padding id equal to the number of nodes
    out = gather_neighbours(feats, ids)
    log.info("aggregated %s", tuple(out.mean(1).shape))
    print(out.sum().item())


if __name__ == "__main__":
    main()
