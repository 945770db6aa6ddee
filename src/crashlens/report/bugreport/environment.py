"""Display strings for the Environment section: versions, GPUs with compute capability, and the
CPU flags that matter for prebuilt wheels and JIT kernels.

    environment_summary(analysis JSON's environment) -> dict (every key present, None if unknown)
"""

from __future__ import annotations

from typing import Any, Mapping

# CPU flags a crash report should mention: the x86 extensions prebuilt wheels and JIT kernels
# dispatch on (ISA levels v2/v3/v4, AVX-512 subsets, AMX)
CPU_FLAGS_THAT_MATTER = (
    "sse4_2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi2", "avx_vnni",
    "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "avx512_vbmi", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
)
_CPU_FLAG_HEADS = ("avx", "avx2", "avx512f", "amx_tile")


def environment_summary(env: Mapping[str, Any]) -> dict[str, Any]:
    """Display strings for the environment; every key is present (None when unknown)."""
    fw = env.get("framework") or {}
    gpus = []
    for g in env.get("gpus") or []:
        bits = [b for b in (f"compute capability {g['compute_capability']}" if g.get("compute_capability") else "",
                            g.get("sm") or "") if b]
        name = g.get("name") or "GPU"
        gpus.append(f"{name}" + (f" ({', '.join(bits)})" if bits else ""))
    flags = env.get("cpu_flags")
    present = [f for f in CPU_FLAGS_THAT_MATTER if flags and f in flags] if flags else None
    absent = [f for f in _CPU_FLAG_HEADS if flags and f not in flags] if flags else None
    first = (env.get("gpus") or [{}])[0]
    driver = env.get("driver_version")
    out = {
        "framework": ", ".join(f"{k} {v}" for k, v in fw.items()) or None,
        "frameworks": dict(fw),
        "packages": dict(env.get("packages") or {}),
        "cuda_runtime": env.get("cuda_runtime"),
        "cuda_toolkit": env.get("cuda_toolkit"),
        "cuda_driver": env.get("cuda_driver"),
        "driver_version": driver,
        "driver": (f"{driver}" + (f" (supports CUDA {env['cuda_driver']})" if env.get("cuda_driver") else ""))
        if driver else (f"supports CUDA {env['cuda_driver']}" if env.get("cuda_driver") else None),
        "cudnn": env.get("cudnn"),
        "cudnn_built": env.get("cudnn_built"),
        "gpu": gpus[0] if gpus else None,
        "gpus": gpus,
        "gpu_name": first.get("name"),
        "compute_capability": first.get("compute_capability"),
        "sm": first.get("sm"),
        "cpu_model": env.get("cpu_model"),
        "cpu_flags": present,
        "cpu_flags_absent": absent,
        "cpu": None,
        "python": env.get("python"),
        "os": env.get("os"),
        "glibc": env.get("glibc"),
        "torch_arch_list": " ".join(env.get("torch_arch_list") or []) or None,
    }
    if present is not None:
        text = " ".join(present) or "none of " + ", ".join(_CPU_FLAG_HEADS)
        if absent and present:
            text += " (no " + ", ".join(absent) + ")"
        out["cpu"] = text
    return out
