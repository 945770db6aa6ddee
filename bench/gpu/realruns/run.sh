#!/usr/bin/env bash
# Real GPU failures for crashlens's real-run evaluation (issue 15). Run on the GPU host:
#   bash bench/gpu/realruns/run.sh [1|2] [CASE]   -> $OUT/realruns.tar (one folder per case)
# Batch 1 (jobs/, labels.yaml) was made first; batch 2 (jobs2/, labels2.yaml) later, to be scored
# blind against the analyzer tuned on batch 1 and the other real sets.
# Each case copies jobs/common.py and its job (as train.py) into a neutral project folder
# /home/ml/<project>/, runs the command there as a batch scheduler would (stdout and stderr
# into one log) and keeps the log, the exit status and the kernel's new lines.
# Labels (by construction) are in labels.yaml beside this script.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
here=$(cd "$(dirname "$0")" && pwd)
res=/tmp/realruns; rm -rf "$res"; mkdir -p "$res"
nvidia-smi > "$res/nvidia-smi.txt" 2>&1
python3 -c 'import torch, sys; print(sys.version); print("torch", torch.__version__)' > "$res/versions.txt" 2>&1
python3 -m pip list 2>/dev/null | grep -iE '^(torch|triton|cupy|jax|lightning|transformers|datasets|numpy) ' >> "$res/versions.txt"
batch=${1:-1}
only=${2:-}
jobs=$here/jobs; [ "$batch" = 2 ] && jobs=$here/jobs2
case_run() {  # name project job timeout command...
  local name=$1 proj=$2 job=$3 limit=$4; shift 4
  [ -n "$only" ] && [ "$only" != "$name" ] && return
  local dir=/home/ml/$proj
  rm -rf "$dir"; mkdir -p "$dir"; cp "$here/jobs/common.py" "$dir/"; cp "$jobs/$job.py" "$dir/train.py"
  mkdir -p "$res/$name"
  local before; before=$(dmesg 2>/dev/null | wc -l)
  echo "+ $*" > "$res/$name/input.log"
  (cd "$dir" && timeout -s KILL "$limit" bash -c "$*") >> "$res/$name/input.log" 2>&1
  echo "exit status $?" >> "$res/$name/input.log"
  dmesg 2>/dev/null | tail -n +"$((before + 1))" | grep -E 'NVRM|Xid|segfault|traps|oom|Killed' > "$res/$name/dmesg.txt"
  [ -s "$res/$name/dmesg.txt" ] || rm -f "$res/$name/dmesg.txt"
  ls "$dir"/core* "$dir"/*.nvcudmp 2>/dev/null | head -3 > "$res/$name/files.txt"
  echo "$name: $(tail -1 "$res/$name/input.log")"
  tar cf "${OUT:-/tmp}/realruns.tar" -C /tmp realruns   # after each case: a cut-off run keeps what it made
}
if [ "$batch" = 1 ]; then
case_run oom-batch vision oom_batch 120 python3 train.py --batch-size 4096 --image-size 256
case_run cublas-full featcache cublas_full 120 python3 train.py
case_run embed-assert textcls embed_assert 120 python3 train.py
case_run label-assert-tqdm imagecls label_assert_tqdm 120 python3 train.py
case_run assert-handler exp17 assert_then_handler 120 python3 train.py
case_run triton-oob kernels triton_oob 120 python3 train.py
case_run cupy-oob retrieval cupy_oob 120 python3 train.py
case_run cupy-oob-sanitizer retrieval cupy_oob 180 compute-sanitizer --tool memcheck python3 train.py
case_run gpu-coredump retrieval cupy_oob 180 CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_FILE=/home/ml/retrieval/core_%p.nvcudmp python3 train.py
case_run misaligned records cupy_misaligned 120 python3 train.py
case_run nccl-dup-gpu ddp ddp_job 150 torchrun --standalone --nproc-per-node 2 train.py dup-gpu
case_run ddp-rank1-oom ddp ddp_job 150 torchrun --standalone --nproc-per-node 2 train.py oom
case_run ddp-rank0-collate ddp ddp_job 150 torchrun --standalone --nproc-per-node 2 train.py collate
case_run no-gpus cifar simple_train 120 CUDA_VISIBLE_DEVICES= python3 train.py
case_run invalid-ordinal cifar simple_train 120 python3 train.py ordinal
case_run device-mismatch cifar simple_train 120 python3 train.py device-mismatch
case_run autocast-dtype cifar simple_train 120 python3 train.py autocast
case_run anomaly cifar simple_train 120 python3 train.py anomaly
case_run timeout-kill longrun long_train 120 timeout -s KILL 25 python3 train.py
case_run lightning-sigterm litrun lit_train 150 timeout 45 python3 train.py
case_run jax-oom jaxmlp jax_oom 120 python3 train.py
case_run cupy-oom knn cupy_oom 120 python3 train.py
case_run ckpt-cuda-on-cpu evalrun ckpt_eval 120 'python3 train.py save && CUDA_VISIBLE_DEVICES= python3 train.py eval'
case_run hf-trainer-oom bert hf_trainer 200 python3 train.py
case_run mem-fraction shared mem_fraction 120 python3 train.py
case_run ext-arch fusedops ext_arch 300 TORCH_CUDA_ARCH_LIST=8.0 python3 train.py
else
case_run lit-label-assert litshift lit_assert 150 python3 train.py
case_run fork-cuda-worker gpuaug fork_cuda 120 python3 train.py
case_run launch-config rowsum launch_config 120 python3 train.py
case_run index-select-assert gnn index_assert 120 python3 train.py
case_run jax-mem-fraction jaxmm jax_frac 120 XLA_PYTHON_CLIENT_MEM_FRACTION=0.002 python3 train.py
case_run ddp-rank1-device-assert ddpemb ddp_assert 150 torchrun --standalone --nproc-per-node 2 train.py
case_run cupy-device-ordinal cupyjob cupy_device 120 python3 train.py
case_run adam-state-oom bigmlp adam_oom 150 python3 train.py
case_run gloo-timeout-slow-rank evalrank slow_rank 150 torchrun --standalone --nproc-per-node 2 train.py
case_run torchrun-timeout-term evalrank slow_rank 150 timeout 12 torchrun --standalone --nproc-per-node 2 train.py
fi
