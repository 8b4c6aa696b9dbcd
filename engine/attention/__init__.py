"""Attention backends (interface, torch reference, Triton), sparse block selection and attribution."""
