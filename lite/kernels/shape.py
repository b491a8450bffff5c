"""Kernels: shape."""
