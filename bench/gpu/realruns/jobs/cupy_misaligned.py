import cupy as cp
from common import log

SRC = r'''
extern "C" __global__ void write_records(char* buf, const double* vals, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) *(double*)(buf + 13 * i + 4) = vals[i];   // packed 13-byte records: unaligned doubles
}'''


def main():
    k = cp.RawKernel(SRC, "write_records")
    n = 4096
    vals = cp.arange(n, dtype=cp.float64)
    buf = cp.zeros(13 * n + 16, dtype=cp.uint8)
    log.info("writing %d packed records", n)
    k(((n + 127) // 128,), (128,), (buf, vals, cp.int32(n)))
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
