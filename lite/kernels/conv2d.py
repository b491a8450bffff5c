"""Kernels: conv2d."""
