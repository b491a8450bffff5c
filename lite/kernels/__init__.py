"""fp32 (and dtype-generic) kernels, one module per op or op family; importing this package registers them."""
from lite.kernels import (activation, arg_min_max, arithmetic, batchnorm, cast, center_crop_pad, col2im,  # noqa: F401
                          compress, concat, conv2d, conv2d_transpose, depth_space, dropout, expand, eye_like,
                          full_connection, gather, gather_elements, gather_nd, identity, layer_norm, lrn,
                          non_max_suppression, non_zero, one_hot, pad, pooling, range, reduce, reshape, resize,
                          reverse_sequence, scatter_elements, scatter_nd, shape, slice, softmax, split, tile, top_k,
                          transpose, trilu, unary, unique)
from lite.kernels import dft, mel_weight_matrix, stft, window  # noqa: F401,E402  (signal)
from lite.kernels import affine_grid, deform_conv, grid_sample, max_roi_pool, max_unpool, roi_align  # noqa: F401,E402
from lite.kernels import bitcast, bitwise, compare, float_class, where  # noqa: F401,E402  (comparison, logic)
from lite.kernels import cumulative, det, einsum, hardmax, mod, unary_math  # noqa: F401,E402  (math)
from lite.kernels import group_norm  # noqa: F401,E402  (normalisation)
from lite.kernels import dynamic_quantize, nll_loss  # noqa: F401,E402  (losses, quantization)
from lite.kernels import random_draws  # noqa: F401,E402
from lite.kernels import ctc_loss, gru, lstm, rnn  # noqa: F401,E402  (recurrent, CTC)
from lite.kernels import (attention, linear_attention, rms_norm, rotary_embedding,  # noqa: F401,E402  (transformer)
                          tensor_scatter)
from lite.kernels import control_flow  # noqa: F401,E402  (If, Loop, Scan)
from lite.kernels import grad, int8  # noqa: F401,E402  (training and int8 kernels)
