"""Triton kernels, each beside its torch reference, and the dispatch between them."""
