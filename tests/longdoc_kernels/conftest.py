"""Kernel tests run the Triton kernels on the CPU through Triton's interpreter (small shapes),
and on a GPU when one is present (tests marked gpu). On a machine without CUDA the interpreter is
switched on here, before any kernel module is imported."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

triton = pytest.importorskip("triton", reason="Triton is not installed (it comes with the dev extras on Linux)")
