"""Kernels: unary."""
