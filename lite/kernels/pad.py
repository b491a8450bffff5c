"""Kernels: pad."""
