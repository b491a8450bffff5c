"""Kernels: lrn."""
