"""Gradient, loss and optimizer kernels of training graphs, one module per forward op family (`<forward>_grad.py`);
importing this package registers them."""
from lite.kernels.grad import (activation_grad, arithmetic_grad, batchnorm_grad, conv2d_grad,  # noqa: F401
                               dropout_grad, full_connection_grad, layer_norm_grad, loss, lrn_grad, optimizer,
                               pooling_grad, shape_grad, softmax_grad, unary_grad)
