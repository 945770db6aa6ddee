#!/bin/bash
# Two-GPU NCCL failures through `crashlens run` (issues 16 and 17), on a 2-GPU host: the Flight
# Recorder armed by crashlens run dumps every rank's collectives into the bundle.
#   hang       rank 1 stays in data loading at step 4; rank 0's all-reduce times out (20 s)
#   mismatch   rank 1 all-reduces a tensor of 2048 elements where rank 0 has 1024, at step 3
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${1:-${OUT:-/tmp}/run-bundles-nccl}
CL=${CRASHLENS:-crashlens}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUTDIR"
for mode in hang mismatch; do
  dir=/home/ml/ddp-$mode; rm -rf "$dir"; mkdir -p "$dir"; cp "$here/jobs/ddp_hang.py" "$dir/train.py"
  (cd "$dir" && timeout -s KILL 240 "$CL" --no-color run -o "$OUTDIR/$mode" --no cuda-coredump -- \
     torchrun --standalone --nproc_per_node=2 train.py "$mode") > "$OUTDIR/$mode.term" 2>&1
  echo "exit $?" >> "$OUTDIR/$mode.term"
  printf '%-10s %s | %s\n' "$mode" "$(tail -1 "$OUTDIR/$mode.term")" "$(ls "$OUTDIR/$mode" | tr '\n' ' ')"
done
