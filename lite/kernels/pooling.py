"""Kernels: pooling."""
