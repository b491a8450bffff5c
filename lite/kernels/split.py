"""Kernels: split."""
