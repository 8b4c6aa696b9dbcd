"""The Triton paths of these tests run on the CPU through Triton's interpreter: without CUDA it is
switched on here, before any kernel module is imported (as in tests/longdoc_kernels)."""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
