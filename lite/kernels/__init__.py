"""fp32 (and dtype-generic) kernels, one module per op or op family; importing this package registers them."""
from lite.kernels import (activation, arithmetic, batchnorm, cast, concat, conv2d, conv2d_transpose,  # noqa: F401
                          dropout, full_connection, gather, identity, layer_norm, lrn, non_max_suppression, pad,
                          pooling, reduce, reshape, resize, shape, slice, softmax, split, transpose, unary)
from lite.kernels import dft, mel_weight_matrix, stft, window  # noqa: F401,E402  (signal)
from lite.kernels import affine_grid, deform_conv, grid_sample, max_roi_pool, max_unpool, roi_align  # noqa: F401,E402
from lite.kernels import grad, int8  # noqa: F401,E402  (training and int8 kernels)
