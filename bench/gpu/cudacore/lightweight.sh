#!/usr/bin/env bash
# One more try at complete GPU core dumps: lightweight dumps (no memory sections) and the
# progress log, with the program waiting for the file (crash.cu's wait_for_coredump).
set -u
src=$PWD/bench/gpu/cudacore
W=/tmp/lw; rm -rf $W; mkdir -p $W/fx; cd $W
ulimit -c 0
nvcc -O2 -lineinfo -arch=sm_90 -o crash_li $src/crash.cu || exit 1
run() { # name mode envs...
  local name=$1 mode=$2; shift 2
  ( echo "+ $* ./crash_li $mode"; env CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION=0 \
      CUDA_COREDUMP_SHOW_PROGRESS=1 CUDA_COREDUMP_FILE=$W/$name.nvcudmp "$@" timeout 50 ./crash_li $mode; echo "exit status $?" ) > fx/$name.log 2>&1
  tail -3 fx/$name.log; ls -la $name.nvcudmp
  timeout 30 cuda-gdb -batch -ex 'set pagination off' -ex "target cudacore $name.nvcudmp" -ex 'info cuda devices' \
    -ex 'info cuda kernels' -ex 'info cuda lanes' -ex 'bt' -ex 'x/2i $pc' -ex 'info line *$pc' -ex 'p/x $errorpc' > fx/$name.cuda-gdb.txt 2>&1
  head -12 fx/$name.cuda-gdb.txt
  cp $name.nvcudmp fx/ 2>/dev/null
}
run lw_trap trap CUDA_ENABLE_LIGHTWEIGHT_COREDUMP=1
run lw_misaligned misaligned CUDA_ENABLE_LIGHTWEIGHT_COREDUMP=1
run nr_trap trap CUDA_COREDUMP_GENERATION_FLAGS=skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory,skip_constbank_memory
tar -cJf $OUT/lw.tar.xz fx; ls -la $OUT
