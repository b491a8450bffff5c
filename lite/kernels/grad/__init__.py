"""Gradient, loss and optimizer kernels of training graphs, one module per forward op family (`<forward>_grad.py`);
importing this package registers them."""
from lite.kernels.grad import (activation_grad, arithmetic_grad, batchnorm_grad, concat_grad,  # noqa: F401
                               conv2d_grad, dropout_grad, full_connection_grad, grid_sample_grad, layer_norm_grad,
                               loss, lrn_grad, optimizer, pad_grad, pooling_grad, reduce_grad, reshape_grad,
                               slice_grad, softmax_grad, split_grad, unary_grad)
from lite.kernels.grad import group_norm_grad, unary_math_grad, where_grad  # noqa: F401,E402
from lite.kernels.grad import gru_grad, lstm_grad, rnn_grad  # noqa: F401,E402  (recurrent)
from lite.kernels.grad import cumulative_grad, det_grad, nll_loss_grad  # noqa: F401,E402
from lite.kernels.grad import attention_grad, rms_norm_grad  # noqa: F401,E402  (transformer)
