"""Gradient, loss and optimizer kernels of training graphs; importing this package registers them."""
from lite.kernels.grad import (activation_grad, arithmetic_grad, conv_grad, dense_grad, loss, norm_grad,  # noqa: F401
                               optimizer, pool_grad, shape_grad)
