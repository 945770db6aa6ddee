"""Binary inputs: ELF files, CUDA fatbins, x86 instruction-set census (and, later, cores)."""
