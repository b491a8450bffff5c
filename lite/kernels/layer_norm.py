"""Kernels: layer_norm."""
