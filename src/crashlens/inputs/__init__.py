"""The input layer: paths in, InputFiles out.

collect_inputs walks files and directories, undoes compression (gzip, xz, bz2, zstd, lz4),
opens archives (zip, tar, nested) and detects every input's kind from its content. Each
InputFile.open() returns a fresh InputStream that never raises on read; its `error` says
why the content ended early (None when it was complete).
"""

from .codecs import DecodingReader
from .collect import collect_inputs
from .detect import classify, detect_codec, detect_container
from .limits import DEFAULT_LIMITS, Limits
from .streams import InputStream

__all__ = [
    "DEFAULT_LIMITS", "DecodingReader", "InputStream", "Limits", "classify", "collect_inputs",
    "detect_codec", "detect_container",
]
