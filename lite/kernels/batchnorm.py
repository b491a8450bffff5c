"""Kernels: batchnorm."""
