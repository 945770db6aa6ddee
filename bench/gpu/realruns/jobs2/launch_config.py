import cupy as cp
from common import log

SRC = r'''
extern "C" __global__ void row_sum(const float* x, float* out, int n) {
    extern __shared__ float buf[];
    int i = threadIdx.x;
    buf[i] = i < n ? x[blockIdx.x * n + i] : 0.f;
    __syncthreads();
    if (i == 0) { float s = 0; for (int k = 0; k < n; ++k) s += buf[k]; out[blockIdx.x] = s; }
}'''


def row_sums(x):
    k = cp.RawKernel(SRC, "row_sum")
    rows, n = x.shape
    out = cp.empty(rows, dtype=cp.float32)
    k((rows,), (n,), (x, out, cp.int32(n)), shared_mem=n * 4)   # one thread per column
    return out


def main():
    x = cp.random.rand(64, 4096, dtype=cp.float32)
    log.info("summing %d rows of %d", *x.shape)
    print(float(row_sums(x).sum()))


if __name__ == "__main__":
    main()
