"""Kernels: concat."""
