"""Gradient, loss and optimizer kernels of training graphs; importing this package registers them."""
from lite.kernels.grad import (activation_grad, arithmetic_grad, conv_grad, dense_grad, grid_sample_grad,  # noqa: F401
                               loss, norm_grad, optimizer, pool_grad, shape_grad)
