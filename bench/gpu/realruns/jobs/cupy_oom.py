import cupy as cp
from common import log


def pairwise_distances(a, b):
    return cp.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def main():
    a = cp.random.rand(200000, 64, dtype=cp.float32)
    log.info("computing all-pairs distances for %d points", a.shape[0])
    d = pairwise_distances(a, a)
    log.info("nearest %s", d.argmin(1)[:5])


if __name__ == "__main__":
    main()
