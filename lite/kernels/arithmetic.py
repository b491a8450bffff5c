"""Kernels: arithmetic."""
