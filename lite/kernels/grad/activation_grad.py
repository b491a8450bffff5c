"""Gradient kernels: activation_grad."""
