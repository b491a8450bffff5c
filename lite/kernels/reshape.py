"""Kernels: reshape."""
