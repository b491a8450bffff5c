"""Gradient kernels: optimizer."""
