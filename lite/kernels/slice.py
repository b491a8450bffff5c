"""Kernels: slice."""
