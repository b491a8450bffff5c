"""Gradient kernels: shape_grad."""
