"""Which x86 instruction-set extensions an ELF file's code uses, where, and how.

For an "Illegal instruction" crash the question is not only *whether* a library contains
AVX-512 (libtorch_cpu.so does, in kernels it runs only after checking CPUID) but whether the
code was *built* for it, so that it will crash on any older CPU (TensorFlow >= 1.6 and AVX).

Entry points:
    isa_census(elf, *, cache=True, jobs=None, first=16) -> IsaCensus
        every executable section decoded with iced-x86, per extension: instruction count,
        first addresses, the functions holding them, the x86-64 level, and the split into
        *baseline* (the code was compiled for it) and *dispatched* (selected at run time).
    function_census(elf, address) -> FunctionIsa   the one function holding an address
    instruction_at(elf, address) -> (mnemonic, extensions)
    decode_at(elf, address) -> DecodedInstruction  the same with text, length, function
    missing_for_cpu(census, cpu_flags) -> dict     what a CPU (its /proc/cpuinfo flags) lacks

How the census is fast: instructions are classified by iced's `Code` (one integer per opcode
form) through tables built once from `Instruction.cpuid_features()` and data/isa.yaml. Each
function is decoded in C (`list(map(attrgetter("code"), Decoder(...)))`, no Python bytecode
per instruction); only functions whose set of codes meets an interesting code are counted in
detail, and Python runs per instruction only to collect the first addresses, in the few earliest
functions that hold each extension.
Work is split by function boundaries (so every piece starts on an instruction boundary) and
spread over forked processes. Results are cached in SQLite keyed by the GNU build-id.

Baseline or dispatched: see `verdict.verdicts` for the rules and the reasons they give.

The package, one concern per module (each imports only those above it):
    tables     Extension, the code -> extension tables and name hints (iced-x86, data/isa.yaml)
    results    IsaCensus, ExtensionUse, FunctionUse, FunctionIsa, DecodedInstruction: the results
    elfcode    IsaError; opening the file, the x86-64 check, executable sections, GNU properties
    sweep      the worker side: chunks decoded in forked processes, aggregates sent back
    verdict    baseline or dispatched, per extension (names, hints, references, CPU guards)
    cache      the SQLite cache keyed by build-id
    census     isa_census: chunks, sweep, merge, first addresses, verdicts, cache
    decode     function_census, decode_at, instruction_at: one function, no cache
    cpu        missing_for_cpu
"""

from __future__ import annotations

from ..readers import build_id
from .cache import cache_dir
from .census import isa_census
from .cpu import missing_for_cpu
from .decode import decode_at, function_census, instruction_at
from .elfcode import IsaError, gnu_property
from .results import DecodedInstruction, ExtensionUse, FunctionIsa, FunctionUse, InstructionIsa, IsaCensus
from .tables import LEVEL_NAMES, Extension, extension, extensions, tables

__all__ = ["isa_census", "function_census", "instruction_at", "decode_at", "missing_for_cpu",
           "extension", "extensions", "tables", "cache_dir", "gnu_property", "build_id", "IsaError",
           "IsaCensus", "ExtensionUse", "FunctionUse", "FunctionIsa", "InstructionIsa", "DecodedInstruction",
           "Extension", "LEVEL_NAMES"]
