"""Gradient, loss and optimizer kernels of training graphs; importing this package registers them."""
from lite.kernels.grad import activation_grad, arithmetic_grad, loss, nn_grad, optimizer, shape_grad  # noqa: F401
