"""Kernels: conv2d_transpose."""
