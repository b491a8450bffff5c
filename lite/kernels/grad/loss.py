"""Gradient kernels: loss."""
