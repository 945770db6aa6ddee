"""Real GPU crash scenarios, run on a GPU host to produce the fixtures in fixtures/gpu-runs/.

Usage on the GPU host:  python3 bench/gpu/cases.py CASE      (see run_all.sh)
Each case is a small, realistic training-like program that fails in one well-known way.
"""
import os
import sys
import time


def log(msg):
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')},{int(time.time()*1000)%1000:03d}][train][INFO] - {msg}", flush=True)


def model_and_data(n_classes=10):
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, n_classes)).cuda()
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def training_step(model, opt, x, y):
    import torch.nn.functional as F
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def label_assert():
    import torch
    model, opt = model_and_data()
    log(f"torch {torch.__version__} device {torch.cuda.get_device_name(0)}")
    for step in range(20):
        x = torch.randn(32, 64, device="cuda")
        y = torch.randint(0, 10, (32,), device="cuda")
        if step == 7:
            y[5] = 10  # a label equal to the number of classes
        loss = training_step(model, opt, x, y)
        if step % 3 == 0:
            print(f"step {step:3d}/20  loss={loss.item():.4f}", flush=True)


def cupy_bad_pointer():
    import cupy as cp
    src = r'''
    extern "C" __global__ void scatter_add(float* out, const long long* idx, const float* v, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[idx[i]] += v[i];
    }'''
    k = cp.RawKernel(src, "scatter_add")
    n = 1 << 16
    out = cp.zeros(1024, dtype=cp.float32)
    idx = cp.arange(n, dtype=cp.int64) * (1 << 26)  # indices far past the end of `out`
    v = cp.ones(n, dtype=cp.float32)
    log("cupy " + cp.__version__ + " scatter_add over %d items" % n)
    k(((n + 255) // 256,), (256,), (out, idx, v, cp.int32(n)))
    cp.cuda.Device().synchronize()
    print(float(out.sum()))


def cupy_misaligned():
    import cupy as cp
    src = r'''
    extern "C" __global__ void pack(char* buf, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) *(double*)(buf + 1 + 8 * i) = 1.0;   // 8-byte store at an odd address
    }'''
    k = cp.RawKernel(src, "pack")
    buf = cp.zeros(1 << 20, dtype=cp.uint8)
    log("packing records")
    k((16,), (128,), (buf, cp.int32(2048)))
    cp.cuda.Device().synchronize()


def gpu_oom():
    import torch
    log(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    keep = []
    for step in range(1000):
        keep.append(torch.empty(8 << 30, dtype=torch.uint8, device="cuda"))  # 8 GiB a step, never freed
        log(f"step {step} cached activations {len(keep)}")


def ddp_worker(mode):
    import datetime
    import torch
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=40))
    model, opt = model_and_data()
    t = torch.ones(1, device="cuda")
    dist.all_reduce(t)
    print(f"rank {rank}: process group ready, world {dist.get_world_size()}", flush=True)
    if mode == "stall" and rank == 0:
        print("rank 0: tokenizing dataset before the first step (slow)", flush=True)
        time.sleep(120)
    for step in range(10):
        x = torch.randn(32, 64, device="cuda")
        y = torch.randint(0, 10, (32,), device="cuda")
        if mode == "assert" and rank == 1 and step == 3:
            emb = torch.nn.Embedding(100, 64).cuda()
            ids = torch.tensor([3, 7, 100], device="cuda")  # 100 is out of range
            x = x[:3] + emb(ids)
            y = y[:3]
        loss = training_step(model, opt, x, y)
        dist.all_reduce(loss.detach())
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    case = sys.argv[1]
    if case.startswith("ddp-"):
        ddp_worker(case[4:])
    else:
        {"label-assert": label_assert, "bad-pointer": cupy_bad_pointer, "misaligned": cupy_misaligned,
         "oom": gpu_oom}[case]()
