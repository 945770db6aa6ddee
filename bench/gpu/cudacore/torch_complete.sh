#!/usr/bin/env bash
# A complete GPU core dump of torch_masked.py (the masked case), memory sections and
# non-relocated images left out (the flags that gave complete dumps on the H100 host); the
# driver aborts the process once the dump is written, so the handler's exception is in the log
# of the earlier run (../../../fixtures/gpu-cores/torch_embed.log), not in this one.
set -u
src=$PWD/bench/gpu/cudacore
W=/tmp/tc; rm -rf $W; mkdir -p $W/fx; cd $W
ulimit -c 0
F=skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory,skip_constbank_memory
( echo "+ python3 torch_masked.py embed"; CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_SHOW_PROGRESS=1 \
  CUDA_COREDUMP_GENERATION_FLAGS=$F CUDA_COREDUMP_FILE=$W/torch_embed_nr.nvcudmp timeout 100 python3 $src/torch_masked.py embed; echo "exit status $?" ) > fx/torch_embed_nr.log 2>&1
tail -5 fx/torch_embed_nr.log; ls -la torch_embed_nr.nvcudmp
timeout 40 cuda-gdb -batch -ex 'set pagination off' -ex "target cudacore torch_embed_nr.nvcudmp" -ex 'info cuda devices' \
  -ex 'info cuda kernels' -ex 'info cuda lanes' -ex 'bt' -ex 'x/2i $pc' -ex 'info line *$pc' -ex 'p/x $errorpc' > fx/torch_embed_nr.cuda-gdb.txt 2>&1
head -12 fx/torch_embed_nr.cuda-gdb.txt
xz -T4 -9 -c torch_embed_nr.nvcudmp > fx/torch_embed_nr.nvcudmp.xz
tar -cf $OUT/tc.tar fx; ls -la $OUT fx
