"""A training step whose GPU fault is masked by its handler's own exception (the seed case's
shape), for GPU core dump fixtures. Run on a GPU host (make_fixtures.sh):

    python3 torch_masked.py embed   # an embedding lookup with a token id past the vocabulary:
                                    # PyTorch's device-side assert in its indexing kernel
    python3 torch_masked.py ext     # a PyTorch C++/CUDA extension whose kernel writes through
                                    # a wild pointer (built with -lineinfo)
"""
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn as nn

EXT_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void gather_rows(float *out, const float *table, const long *ids, int n, int dim) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * dim) return;
    long row = ids[i / dim];
    out[i] = table[row * dim + (i % dim)];
    if (row > 1000000) out[row * 4096] = 0.0f;  // a wild write for an out-of-range id
}

torch::Tensor gather(torch::Tensor table, torch::Tensor ids) {
    auto out = torch::empty({ids.size(0), table.size(1)}, table.options());
    int n = ids.size(0), dim = table.size(1);
    int threads = 256, blocks = (n * dim + threads - 1) / threads;
    gather_rows<<<blocks, threads>>>(out.data_ptr<float>(), table.data_ptr<float>(),
                                      ids.data_ptr<long>(), n, dim);
    return out;
}
"""
CPP_SRC = "torch::Tensor gather(torch::Tensor table, torch::Tensor ids);"


def wait_for_coredump():
    """The driver writes the GPU core dump from a thread of its own while the failed call
    returns (CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION=0); wait (at most 45 s) until the file holds
    its section header table, i.e. the dump is complete, so that the exit does not cut it short."""
    import struct
    f = os.environ.get("CUDA_COREDUMP_FILE")
    if not f or not os.environ.get("CUDA_ENABLE_COREDUMP_ON_EXCEPTION"):
        return
    for _ in range(450):
        try:
            with open(f, "rb") as fh:
                h = fh.read(64)
                size = os.fstat(fh.fileno()).st_size
            if len(h) == 64:
                shoff, = struct.unpack_from("<Q", h, 0x28)
                shentsize, shnum = struct.unpack_from("<HH", h, 0x3a)
                if shoff and size >= shoff + shentsize * shnum:
                    time.sleep(0.2)
                    return
        except OSError:
            pass
        time.sleep(0.1)


def log(msg):
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}][train][INFO] - {msg}", flush=True)


def validation_step(model, ids, gather=None):
    if gather is not None:
        emb = gather(model[0].weight, ids)
    else:
        emb = model[0](ids)
    logits = model[1](emb)
    return logits.float().mean().item()


def main(mode):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(5000, 64), nn.Linear(64, 10)).cuda()
    gather = None
    if mode == "ext":
        from torch.utils.cpp_extension import load_inline
        ext = load_inline("gather_ext", CPP_SRC, cuda_sources=EXT_SRC, functions=["gather"],
                          extra_cuda_cflags=["-lineinfo", "-O2"], verbose=False)
        gather = ext.gather
    log(f"torch {torch.__version__} device {torch.cuda.get_device_name(0)}")
    ckpt_dir = Path("checkpoints/run-3")
    try:
        for step in range(4):
            ids = torch.randint(0, 5000, (256,), device="cuda")
            if step == 2:
                ids[17] = 5000 if mode == "embed" else 1 << 40
            loss = validation_step(model, ids, gather)
            print(f"step {step}/4 val_loss={loss:.4f}", flush=True)
    except Exception:
        # the handler fails too: its FileNotFoundError masks the CUDA error
        Path(ckpt_dir, "FAILED").write_text(traceback.format_exc())


if __name__ == "__main__":
    import atexit
    atexit.register(wait_for_coredump)
    main(sys.argv[1] if len(sys.argv) > 1 else "embed")
