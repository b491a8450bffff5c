"""Kernels: cast."""
