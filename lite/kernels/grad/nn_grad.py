"""Gradient kernels: nn_grad."""
