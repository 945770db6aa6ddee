#!/usr/bin/env bash
# Builds the programs of this folder on a GPU host, crashes them with GPU core dumps on, opens
# every dump in cuda-gdb, runs the same programs under compute-sanitizer and packs it all into
# $OUT (fixtures.tar.xz, big.tar.xz). Run from the repository root:
#   timeout 520 bash bench/gpu/cudacore/make_fixtures.sh | tee $OUT/make.log; bash bench/gpu/cudacore/make_fixtures.sh pack
set -u
W=/tmp/cc
if [ "${1-}" = pack ]; then
  cd $W && for f in *.nvcudmp; do cp $f fx/; done
  tar -cJf $OUT/fixtures.tar.xz fx; tar -cJf $OUT/big.tar.xz big; ls -la $OUT; exit 0
fi
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
src=$(cd "$(dirname "$0")" && pwd)
rm -rf $W; mkdir -p $W/fx $W/big; cd $W
exec 2>&1
T0=$(date +%s.%N)
stamp() { echo "[$(python3 -c "import time;print(round(time.time()-$T0,1))")s] $*"; }
SMALL='skip_global_memory,skip_shared_memory,skip_local_memory'
{ nvidia-smi; nvcc --version; cuda-gdb --version | head -3; compute-sanitizer --version; nvdisasm --version; python3 -c 'import torch;print(torch.__version__)'; } > fx/versions.txt 2>&1
cat fx/versions.txt | head -30
cp $src/crash.cu $src/torch_masked.py fx/
stamp build
nvcc -O2 -lineinfo -arch=sm_90 -o crash_li $src/crash.cu & p1=$!
nvcc -O2 -arch=sm_90 -o crash $src/crash.cu & p2=$!
nvcc -O2 -lineinfo -gencode arch=compute_80,code=compute_80 -o crash_ptx $src/crash.cu & p3=$!
wait $p1 $p2 $p3
ls -la crash*
for b in crash_li crash; do
  cuobjdump -sass $b > fx/$b.sass.txt 2>&1
  mkdir -p x_$b; (cd x_$b && cuobjdump -xelf all ../$b >/dev/null 2>&1; for c in *.cubin; do nvdisasm -g -c -hex "$c" > ../fx/$b.nvdisasm.txt 2>&1; cp "$c" ../fx/$b.sm_90.cubin; done)
done
gdbcmds() {  # dump -> cuda-gdb output
  timeout 40 cuda-gdb -batch -ex 'set pagination off' -ex "target cudacore $1" -ex 'info cuda devices' \
    -ex 'info cuda kernels' -ex 'info cuda lanes' -ex 'bt' -ex 'x/2i $pc' -ex 'info line *$pc' \
    -ex 'p/x $errorpc' -ex 'info cuda contexts' 2>&1
}
crash_case() {  # name binary mode [flags]
  local name=$1 bin=$2 mode=$3 flags=${4-$SMALL}
  if [ $(python3 -c "import time;print(int(time.time()-$T0))") -gt 400 ]; then echo "skip $name: out of time"; return; fi
  stamp "case $name"
  ( echo "+ ./$bin $mode"; CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION=0 \
    CUDA_COREDUMP_GENERATION_FLAGS="$flags" CUDA_COREDUMP_FILE=$W/$name.nvcudmp timeout 120 ./$bin $mode; echo "exit status $?" ) > fx/$name.log 2>&1
  ls -la $name.nvcudmp 2>&1 | tee -a fx/$name.files
  gdbcmds $name.nvcudmp > fx/$name.cuda-gdb.txt
  tail -25 fx/$name.cuda-gdb.txt
}
for m in wild misaligned trap assert oob; do crash_case ${m}_li crash_li $m; done
export CUDA_COREDUMP_SHOW_PROGRESS=1; crash_case trap_progress crash_li trap; unset CUDA_COREDUMP_SHOW_PROGRESS
crash_case wild crash wild; crash_case assert crash assert
crash_case wild_ptx crash_ptx wild
crash_case wild_gz crash_li wild "$SMALL,gzip_compress"
stamp "sanitizer"
for m in wild misaligned trap assert oob; do
  (echo "+ compute-sanitizer --tool memcheck ./crash_li $m"; timeout 60 compute-sanitizer --tool memcheck ./crash_li $m; echo "exit status $?") > fx/san_memcheck_$m.log 2>&1
done
(echo "+ compute-sanitizer --tool memcheck ./crash wild"; timeout 60 compute-sanitizer --tool memcheck ./crash wild; echo "exit status $?") > fx/san_memcheck_wild_nolineinfo.log 2>&1
for tm in racecheck:race initcheck:uninit synccheck:badsync; do t=${tm%%:*}; m=${tm##*:}
  (echo "+ compute-sanitizer --tool $t ./crash_li $m"; timeout 60 compute-sanitizer --tool $t ./crash_li $m; echo "exit status $?") > fx/san_${t}_$m.log 2>&1
done
head -40 fx/san_memcheck_wild.log fx/san_racecheck_race.log fx/san_initcheck_uninit.log fx/san_synccheck_badsync.log
stamp "torch"
for m in embed ext; do
  ( echo "+ python3 train.py --mode $m"; cd $W && CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION=0 \
    CUDA_COREDUMP_GENERATION_FLAGS="$SMALL" CUDA_COREDUMP_FILE=$W/torch_$m.nvcudmp timeout 200 python3 $src/torch_masked.py $m; echo "exit status $?" ) > fx/torch_$m.log 2>&1
  ls -la torch_$m.nvcudmp; tail -5 fx/torch_$m.log
  gdbcmds torch_$m.nvcudmp > fx/torch_$m.cuda-gdb.txt; tail -20 fx/torch_$m.cuda-gdb.txt
done
crash_case big crash_li big ""
mv big.nvcudmp big/ 2>/dev/null; cp fx/big.* big/ 2>/dev/null
stamp "timing"
python3 - <<'PY' > fx/cuda-gdb-timing.json
import glob, json, os, subprocess, time
res = {}
for f in ['wild_li.nvcudmp', 'torch_embed.nvcudmp', 'big/big.nvcudmp']:
    if not os.path.exists(f): continue
    t = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(['timeout', '60', 'cuda-gdb', '-batch', '-ex', f'target cudacore {f}', '-ex', 'info cuda kernels', '-ex', 'bt'], capture_output=True)
        t.append(time.perf_counter() - t0)
    res[f] = {'size': os.path.getsize(f), 'seconds': sorted(t)}
print(json.dumps(res, indent=1))
PY
cat fx/cuda-gdb-timing.json
nproc > fx/host.txt; lscpu | head -20 >> fx/host.txt
stamp done
