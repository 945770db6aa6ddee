import cupy as cp
from common import log


def main():
    gpu = 3                          # from a config written for the 4-GPU node
    with cp.cuda.Device(gpu):
        x = cp.arange(10)
        log.info("sum %d", int(x.sum()))


if __name__ == "__main__":
    main()
