"""model.py: closed sets are string enums that compare equal to, and serialise as, their strings."""

from __future__ import annotations

import json
import pickle

import pytest

from crashlens.model import Frame, FrameKind
from crashlens.pathkinds import frame_kind


def test_frame_kind_is_an_enum_equal_to_its_string():
    f = Frame("native", "abort", module="/lib/libc.so.6")  # a plain string becomes the member
    assert f.kind is FrameKind.NATIVE and f.kind == "native" and f"{f.kind}" == "native"
    assert f == Frame(FrameKind.NATIVE, "abort", module="/lib/libc.so.6")
    assert json.dumps({"kind": f.kind}) == '{"kind": "native"}'
    assert pickle.loads(pickle.dumps(f)).kind is FrameKind.NATIVE
    assert {str(k) for k in FrameKind} == {"user", "library", "native", "gpu"}


def test_frame_kind_by_path():
    assert frame_kind("/home/me/train.py") is FrameKind.USER
    assert frame_kind("/usr/lib/python3.11/site-packages/torch/nn/modules/module.py") is FrameKind.LIBRARY


def test_an_unknown_frame_kind_is_refused():
    with pytest.raises(ValueError):
        Frame("kernel", "f")
