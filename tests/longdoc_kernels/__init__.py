"""Tests of the Triton kernels against their torch references."""
