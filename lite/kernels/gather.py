"""Kernels: gather."""
