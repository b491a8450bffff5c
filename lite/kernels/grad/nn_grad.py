"""Gradient kernels of the neural-network ops. Importing this module registers them all: convolution and bias
(`conv_grad`), pooling (`pool_grad`), normalisation (`norm_grad`) and the dense, softmax and dropout gradients
(`dense_grad`)."""
from lite.kernels.grad import conv_grad, dense_grad, norm_grad, pool_grad  # noqa: F401
