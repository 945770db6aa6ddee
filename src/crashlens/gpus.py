"""GPU product names -> CUDA compute capability, from data/gpus.yaml (read through crashlens.knowledge).

    gpu_compute_capability("NVIDIA A100-SXM4-80GB") -> "8.0"      None when the name is unknown
    gpu_name_words(name) -> ("a100", "sxm4", "80gb")              the words names are matched on

A neutral module: the environment parser (nvidia-smi, collect_env) and binary/cudacompat
(`inspect --gpu H100`) both use it; it imports only crashlens.knowledge.
"""

from __future__ import annotations

import functools

import regex as re

from .knowledge import data as _data

__all__ = ["gpu_compute_capability", "gpu_name_words"]

_VENDOR_WORDS = frozenset({"nvidia", "geforce", "tesla", "quadro"})


def gpu_name_words(name: str) -> tuple[str, ...]:
    """The lower-cased words of a GPU name, without vendor and brand words."""
    return tuple(w for w in re.split(r"[^0-9a-z]+", name.lower()) if w and w not in _VENDOR_WORDS)


@functools.cache
def _gpu_table() -> tuple[tuple[tuple[str, ...], str], ...]:
    rows = [(gpu_name_words(str(name)), str(cc)) for cc, names in _data("gpus.yaml").items() for name in names]
    # Longest names first: "rtx 6000 ada" must be tried before "rtx 6000".
    return tuple(sorted(rows, key=lambda row: -len(row[0])))


def gpu_compute_capability(name: str) -> str | None:
    """Compute capability ("8.0") of a GPU product name, from data/gpus.yaml; None if unknown."""
    words = gpu_name_words(name)
    for key, cc in _gpu_table():
        n = len(key)
        if any(words[i : i + n] == key for i in range(len(words) - n + 1)):
            return cc
    return None
