"""Tests of engine.runner: the GPU-side paths (sampling, CUDA graphs, fused layers) and engine logits on a GPU."""
