"""Whose code a source file is, judged by its path: the user's, or a library's (an installed
package, the standard library, PyTorch, a frozen or generated module).

    frame_kind("/home/me/train.py") -> FrameKind.USER
    frame_kind("/usr/lib/python3.11/site-packages/torch/nn/modules/module.py") -> FrameKind.LIBRARY

A neutral module: the traceback parser and binary/pyframes (Python frames read from a core)
both use it; it imports only crashlens.model.
"""

from __future__ import annotations

import regex as re

from .model import FrameKind

__all__ = ["LIBRARY_PATH", "frame_kind"]

LIBRARY_PATH = re.compile(
    r"(?:site-packages|dist-packages|/lib/python\d|lib64/python\d|<frozen |\.egg/|/usr/lib/|"
    r"/opt/conda/lib/|\\Lib\\|(?i:[\\/]Python\d*[\\/]lib[\\/])|importlib/_bootstrap|/torch/|^<string>$|<decorator-gen|<__array_function__|"
    # generated code (joblib/loky's "<dynamic-code>", makefun)
    r"^<dynamic-code>$|^<makefun-gen|"
    # a checkout of a library's own repository (".../pytorch-image-models/timm/models/_factory.py",
    # ".../mmdetection-master/mmdet/models/builder.py"): the library's code, outside its tools and
    # examples; a project that forked the package under its own name (".../rankSortLoss-main/mmdet/")
    # is the project's code
    r"(?i:[\\/](?:pytorch-image-models|timm)(?:-main|-master)?[\\/]timm[\\/]|"
    r"[\\/]mmdetection(?:-main|-master)?[\\/]mmdet[\\/]|[\\/]mmdetection3d(?:-main|-master)?[\\/]mmdet3d[\\/]|"
    r"[\\/]mmsegmentation(?:-main|-master)?[\\/]mmseg[\\/]|[\\/](mmcv|mmengine|detectron2|transformers|diffusers)"
    r"(?:-main|-master)?[\\/]\1[\\/])(?!tools|scripts|examples|demo|projects|configs|tests)\w+[\\/]|"
    # Cython sources of a compiled package (cupy_backends/cuda/api/runtime.pyx): relative paths, never the job's
    r"\.py[xi]$|\.px[di]$)"
)


def frame_kind(path: str) -> FrameKind:
    return FrameKind.LIBRARY if LIBRARY_PATH.search(path) else FrameKind.USER
