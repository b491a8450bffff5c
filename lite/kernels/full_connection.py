"""Kernels: full_connection."""
