#!/usr/bin/env bash
# GPU core dumps of JIT-compiled modules (fixtures/gpu-cores/jit): the driver compiles the PTX
# of crash.cu at load time, either forced (CUDA_FORCE_PTX_JIT=1 on the sm_90 build, which also
# holds compute_90 PTX) or because the executable holds PTX only (compute_90, no SASS).
set -u
src=$PWD/bench/gpu/cudacore
W=/tmp/jit; rm -rf $W; mkdir -p $W/fx; cd $W
ulimit -c 0
nvcc -O2 -lineinfo -arch=sm_90 -o crash_li $src/crash.cu || exit 1
nvcc -O2 -lineinfo -gencode arch=compute_90,code=compute_90 -o crash_ptx $src/crash.cu || exit 1
FLAGS=skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory,skip_constbank_memory
run() { # name exe mode envs...
  local name=$1 exe=$2 mode=$3; shift 3
  ( echo "+ $* ./$exe $mode"; env CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION=0 \
      CUDA_COREDUMP_SHOW_PROGRESS=1 CUDA_COREDUMP_FILE=$W/$name.nvcudmp "$@" timeout 50 ./$exe $mode; echo "exit status $?" ) > fx/$name.log 2>&1
  tail -3 fx/$name.log; ls -la $name.nvcudmp
  timeout 30 cuda-gdb -batch -ex 'set pagination off' -ex "target cudacore $name.nvcudmp" -ex 'info cuda devices' \
    -ex 'info cuda kernels' -ex 'info cuda lanes' -ex 'bt' -ex 'x/2i $pc' -ex 'info line *$pc' -ex 'p/x $errorpc' > fx/$name.cuda-gdb.txt 2>&1
  head -8 fx/$name.cuda-gdb.txt
  xz -9 -c $name.nvcudmp > fx/$name.nvcudmp.xz 2>/dev/null
}
run forcejit_trap crash_li trap CUDA_FORCE_PTX_JIT=1 CUDA_COREDUMP_GENERATION_FLAGS=$FLAGS
run ptxonly_trap crash_ptx trap CUDA_COREDUMP_GENERATION_FLAGS=$FLAGS
run ptxonly_lw_trap crash_ptx trap CUDA_ENABLE_LIGHTWEIGHT_COREDUMP=1
cp crash_li crash_ptx fx/
tar -cJf $OUT/jit.tar.xz fx; ls -la $OUT fx
