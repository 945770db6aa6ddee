#!/usr/bin/env bash
# Second try at complete GPU core dumps: the driver's default (abort the process once the dump
# is written) instead of CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION=0, whose dumps stalled at 68,672
# bytes on the Firecracker H100 host (make_fixtures.sh). Host cores off (ulimit -c 0).
set -u
src=$(cd "$(dirname "$0")" && pwd)
W=/tmp/cr; rm -rf $W; mkdir -p $W/fx; cd $W
ulimit -c 0
nvcc -O2 -lineinfo -arch=sm_90 -o crash_li $src/crash.cu
for m in trap assert misaligned; do
  ( echo "+ ./crash_li $m"; CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_SHOW_PROGRESS=1 \
    CUDA_COREDUMP_GENERATION_FLAGS='skip_global_memory,skip_shared_memory,skip_local_memory' \
    CUDA_COREDUMP_FILE=$W/${m}_abort.nvcudmp timeout 40 ./crash_li $m; echo "exit status $?" ) > fx/${m}_abort.log 2>&1
  tail -4 fx/${m}_abort.log; ls -la ${m}_abort.nvcudmp
  timeout 30 cuda-gdb -batch -ex 'set pagination off' -ex "target cudacore ${m}_abort.nvcudmp" -ex 'info cuda devices' \
    -ex 'info cuda kernels' -ex 'info cuda lanes' -ex 'bt' -ex 'x/2i $pc' -ex 'info line *$pc' -ex 'p/x $errorpc' > fx/${m}_abort.cuda-gdb.txt 2>&1
  head -30 fx/${m}_abort.cuda-gdb.txt
  cp ${m}_abort.nvcudmp fx/ 2>/dev/null
done
tar -cJf $OUT/retry.tar.xz fx
