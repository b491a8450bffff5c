"""Gradient kernels: arithmetic_grad."""
