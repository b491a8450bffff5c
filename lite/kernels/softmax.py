"""Kernels: softmax."""
