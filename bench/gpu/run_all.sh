#!/usr/bin/env bash
# Runs every scenario of cases.py on a GPU host and writes one log per case into $OUT.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
here=$(dirname "$0")
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
for c in label-assert bad-pointer misaligned oom; do
  echo "+ python3 train.py $c" > "$OUT/$c.log"
  timeout 120 python3 "$here/cases.py" "$c" >> "$OUT/$c.log" 2>&1; echo "exit status $?" >> "$OUT/$c.log"
done
n=$(nvidia-smi -L | wc -l)
if [ "$n" -ge 2 ]; then
  for m in assert stall; do
    echo "+ torchrun --nproc-per-node 2 train.py ddp-$m" > "$OUT/ddp-$m.log"
    timeout 240 python3 -m torch.distributed.run --nproc-per-node 2 "$here/cases.py" "ddp-$m" >> "$OUT/ddp-$m.log" 2>&1
    echo "exit status $?" >> "$OUT/ddp-$m.log"
  done
fi
dmesg > "$OUT/dmesg.txt" 2>&1 || journalctl -k --no-pager > "$OUT/dmesg.txt" 2>&1
ls -la "$OUT"
