// Small CUDA programs that fault on the GPU in well-known ways, for GPU core dump and
// compute-sanitizer fixtures (bench/gpu/cudacore/make_fixtures.sh).
// Usage: ./crash MODE   with MODE one of: wild misaligned trap assert oob big race uninit badsync
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <cuda_runtime.h>

// The driver writes the GPU core dump from a thread of its own while the failed API call
// returns (with CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION=0); a process that exits at once leaves a
// truncated dump. Wait until the file holds its section header table (ELF64: e_shoff at 0x28,
// e_shentsize at 0x3a, e_shnum at 0x3c), i.e. until the dump is complete, for at most 45 s.
static void wait_for_coredump() {
    const char *f = getenv("CUDA_COREDUMP_FILE");
    if (!f || !getenv("CUDA_ENABLE_COREDUMP_ON_EXCEPTION")) return;
    long last = -1; int same = 0;  // a compressed dump (gzip_compress): wait for a stable size
    for (int i = 0; i < 450; i++, usleep(100000)) {
        FILE *fp = fopen(f, "rb");
        if (!fp) continue;
        unsigned char h[64]; size_t got = fread(h, 1, 64, fp);
        fseek(fp, 0, SEEK_END); long size = ftell(fp); fclose(fp);
        if (got < 64) continue;
        if (h[0] != 0x7f) { same = size == last ? same + 1 : 0; last = size; if (same >= 30) return; continue; }
        unsigned long long shoff; unsigned short shentsize, shnum;
        memcpy(&shoff, h + 0x28, 8); memcpy(&shentsize, h + 0x3a, 2); memcpy(&shnum, h + 0x3c, 2);
        if (shoff && size >= (long)(shoff + (unsigned long long)shentsize * shnum)) { usleep(200000); return; }
    }
}

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "CUDA error: %s (%s) at %s:%d\n", cudaGetErrorString(e_), cudaGetErrorName(e_), __FILE__, __LINE__); \
    wait_for_coredump(); return 1; } } while (0)

__device__ __noinline__ void store_value(int *p, int v) {
    *p = v;  // the faulting store of the wild mode
}

__global__ void write_wild(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int *p = out + i;
    if (blockIdx.x == 1 && threadIdx.x == 5)
        p = reinterpret_cast<int *>(0x100ull);
    if (i < n) store_value(p, i);
}

__global__ void write_misaligned(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    char *base = reinterpret_cast<char *>(out + i);
    if (threadIdx.x == 3) base += 2;
    if (i < n) *reinterpret_cast<int *>(base) = i;
}

__global__ void trap_kernel(float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 7) __trap();
    if (i < n) out[i] = 1.0f;
}

__global__ void check_labels(const int *labels, int n, int classes) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) assert(labels[i] < classes);
}

template <typename T>
__global__ void scatter_kernel(T *out, const long long *idx, const T *src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[idx[i]] = src[i];
}

__global__ void racy_sum(int *out) {
    __shared__ int acc;
    if (threadIdx.x == 0) acc = 0;
    __syncthreads();
    acc += threadIdx.x;  // unsynchronised read-modify-write of shared memory
    __syncthreads();
    if (threadIdx.x == 0) *out = acc;
}

__global__ void read_uninit(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * 2.0f;
}

__global__ void divergent_barrier(int *out) {
    if (threadIdx.x < 16) __syncthreads();  // barrier reached by half of the block
    out[threadIdx.x] = threadIdx.x;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "wild";
    const int n = 1024, threads = 128, blocks = n / threads;
    int *d = nullptr; float *f = nullptr, *g = nullptr; long long *idx = nullptr;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    CHECK(cudaMalloc(&f, n * sizeof(float)));
    CHECK(cudaMalloc(&g, n * sizeof(float)));
    CHECK(cudaMalloc(&idx, n * sizeof(long long)));
    CHECK(cudaMemset(d, 0, n * sizeof(int)));
    printf("mode %s: launching %d blocks of %d threads\n", mode, blocks, threads);
    fflush(stdout);
    if (!strcmp(mode, "wild")) {
        write_wild<<<blocks, threads>>>(d, n);
    } else if (!strcmp(mode, "big")) {
        void *big = nullptr;
        CHECK(cudaMalloc(&big, 96u << 20));
        CHECK(cudaMemset(big, 0x5a, 96u << 20));
        write_wild<<<blocks, threads>>>(d, n);
    } else if (!strcmp(mode, "misaligned")) {
        write_misaligned<<<blocks, threads>>>(d, n);
    } else if (!strcmp(mode, "trap")) {
        trap_kernel<<<blocks, threads>>>(f, n);
    } else if (!strcmp(mode, "assert")) {
        int *h = (int *)malloc(n * sizeof(int));
        for (int i = 0; i < n; i++) h[i] = i % 10;
        h[300] = 10;  // a label equal to the number of classes
        CHECK(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
        check_labels<<<blocks, threads>>>(d, n, 10);
    } else if (!strcmp(mode, "oob")) {
        long long *h = (long long *)malloc(n * sizeof(long long));
        for (int i = 0; i < n; i++) h[i] = i;
        h[389] = 1ll << 50;  // an index far past the end of `out`
        CHECK(cudaMemcpy(idx, h, n * sizeof(long long), cudaMemcpyHostToDevice));
        scatter_kernel<float><<<blocks, threads>>>(f, idx, g, n);
    } else if (!strcmp(mode, "race")) {
        racy_sum<<<1, 256>>>(d);
    } else if (!strcmp(mode, "uninit")) {
        read_uninit<<<blocks, threads>>>(f, g, n);
    } else if (!strcmp(mode, "badsync")) {
        divergent_barrier<<<1, 32>>>(d);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("mode %s: finished without error\n", mode);
    return 0;
}
