"""Kernels: resize."""
