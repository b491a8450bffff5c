"""Kernels: reduce."""
