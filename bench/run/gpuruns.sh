#!/bin/bash
# Real GPU failures through `crashlens run` (issue 16), on the GPU host, one bundle each under
# OUT (default $OUT/run-bundles-gpu or /tmp/run-bundles-gpu). The jobs are those of
# bench/gpu/realruns/jobs, copied into neutral project folders:
#   device-assert   an embedding lookup with an index past the table (device-side assert)
#   illegal-address a Triton kernel with a stride bug (illegal memory access; the GPU core dump
#                   that crashlens run arms lands in the bundle)
#   cublas-full     a feature cache fills the GPU, then a matmul fails as CUBLAS_STATUS_ALLOC_FAILED
# Needs crashlens on PATH (CRASHLENS=… to choose one) and python3 with torch and triton.
set -u
here=$(cd "$(dirname "$0")" && pwd)
jobs=$here/../gpu/realruns/jobs
OUTDIR=${1:-${OUT:-/tmp}/run-bundles-gpu}
CL=${CRASHLENS:-crashlens}
export PYTHONUNBUFFERED=1
mkdir -p "$OUTDIR"
one() {  # name project job args...
  local name=$1 proj=$2 job=$3; shift 3
  local dir=/home/ml/$proj
  rm -rf "$dir"; mkdir -p "$dir"; cp "$jobs/common.py" "$dir/"; cp "$jobs/$job.py" "$dir/train.py"
  (cd "$dir" && timeout -s KILL 300 "$CL" --no-color run -o "$OUTDIR/$name" -- python3 train.py "$@") \
    > "$OUTDIR/$name.term" 2>&1
  echo "exit $?" >> "$OUTDIR/$name.term"
  printf '%-16s %s | %s\n' "$name" "$(tail -1 "$OUTDIR/$name.term")" \
    "$(python3 -c "import json;d=json.load(open('$OUTDIR/$name/analysis.json'));c=d['causes'];print(c[0]['category'] if c else None, '|', d.get('gpu_crash') and 'gpu_crash' or '')" 2>&1 | tail -1)"
}
one device-assert textcls embed_assert
one illegal-address kernels triton_oob
one cublas-full featcache cublas_full
ls -la "$OUTDIR"/*/ | head -60
