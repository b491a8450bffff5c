"""The MindSpore networks the MINDIR tests export (needs `mindspore`): LeNet, a small ResNet with BatchNorm, a
MobileNetV2-style net (depthwise convolutions, ReLU6, inverted residuals, global average pooling), a transformer
encoder block, transposed convolutions, a bidirectional LSTM, a GRU, resizes, an if/else, a while loop, and nets of
the remaining shape, indexing and elementwise primitives."""
from __future__ import annotations

from functools import partial

import mindspore as ms
import numpy as np
from mindspore import nn, ops


class LeNet(nn.Cell):
    def __init__(self, classes: int = 10, widths: tuple[int, int, int, int] = (6, 16, 120, 84)):
        super().__init__()
        c1, c2, f1, f2 = widths
        self.conv1 = nn.Conv2d(1, c1, 5, pad_mode="valid")
        self.conv2 = nn.Conv2d(c1, c2, 5, pad_mode="valid")
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2, 2)
        self.flatten = nn.Flatten()
        self.fc1, self.fc2, self.fc3 = nn.Dense(25 * c2, f1), nn.Dense(f1, f2), nn.Dense(f2, classes)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = self.flatten(x)
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


class Residual(nn.Cell):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.SequentialCell(
            nn.Conv2d(cin, cout, 3, stride, pad_mode="pad", padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, pad_mode="same"), nn.BatchNorm2d(cout))
        self.skip = (nn.SequentialCell(nn.Conv2d(cin, cout, 1, stride), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else None)
        self.relu = nn.ReLU()

    def construct(self, x):
        skip = x if self.skip is None else self.skip(x)
        return self.relu(self.body(x) + skip)


class SmallResNet(nn.Cell):
    def __init__(self, classes: int = 10, width: int = 16):
        super().__init__()
        self.stem = nn.SequentialCell(nn.Conv2d(3, width, 3, pad_mode="pad", padding=1, has_bias=True),
                                      nn.BatchNorm2d(width), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, pad_mode="same"))
        self.stages = nn.SequentialCell(Residual(width, width, 1), Residual(width, 2 * width, 2))
        self.mean = ops.ReduceMean(keep_dims=False)
        self.fc = nn.Dense(2 * width, classes)

    def construct(self, x):
        return self.fc(self.mean(self.stages(self.stem(x)), (2, 3)))


class InvertedResidual(nn.Cell):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.block = nn.SequentialCell(
            nn.Conv2d(cin, hidden, 1), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, stride, pad_mode="pad", padding=1, group=hidden), nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, cout, 1), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def construct(self, x):
        y = self.block(x)
        return x + y if self.residual else y


def dropout(p: float) -> nn.Cell:
    """nn.Dropout zeroing a fraction `p` (MindSpore 1.x takes the fraction kept)."""
    try:
        return nn.Dropout(p=p)
    except TypeError:
        return nn.Dropout(keep_prob=1 - p)


class MobileNetV2Like(nn.Cell):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.SequentialCell(
            nn.Conv2d(3, 16, 3, 2, pad_mode="pad", padding=1), nn.BatchNorm2d(16), nn.ReLU6(),
            InvertedResidual(16, 16, 1, 1), InvertedResidual(16, 24, 2, 4), InvertedResidual(24, 24, 1, 4),
            nn.Conv2d(24, 64, 1), nn.BatchNorm2d(64), nn.HSwish())
        self.pool = nn.AvgPool2d(8, 8)
        self.head = nn.SequentialCell(nn.Flatten(), dropout(0.2), nn.Dense(64, classes), nn.Softmax())

    def construct(self, x):
        return self.head(self.pool(self.features(x)))


class Primitives(nn.Cell):
    """One of each shape, indexing and elementwise primitive the CNN nets do not use, on [2, 4, 6, 8] inputs."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm((8,), begin_norm_axis=-1, begin_params_axis=-1)
        self.pool = nn.AvgPool2d(3, 2, pad_mode="same")
        self.gelu, self.sigmoid, self.tanh = nn.GELU(), nn.Sigmoid(), nn.Tanh()
        self.indices = ms.Tensor(np.array([2, 0, 1], np.int32))
        self.scale = ms.Parameter(ms.Tensor(np.linspace(0.5, 1.5, 8).astype(np.float32)), name="scale")

    def construct(self, x):
        a = self.norm(x) * self.scale                                   # LayerNorm, Mul
        b = ops.transpose(self.pool(x), (0, 1, 3, 2))                   # AvgPool (same), Transpose: [2, 4, 4, 3]
        c = ops.reshape(b, (2, 4, 12))[:, 1:3, ::2]                     # Reshape, StridedSlice: [2, 2, 6]
        d = ops.gather(a, self.indices, 1)[:, :, 0, :]                  # Gather, StridedSlice (shrink): [2, 3, 8]
        e = ops.concat((ops.sigmoid(c), self.tanh(c) - 0.5), axis=2)    # Concat, Sigmoid, Tanh, Sub: [2, 2, 12]
        f = ops.bmm(d.transpose(0, 2, 1), ops.ones((2, 3, 12), ms.float32) / 3.0)   # BatchMatMul, RealDiv
        g = ops.expand_dims(ops.squeeze(f[:, :2, :1], 2), 2) * e[:, :, :1].astype(ms.float16).astype(ms.float32)
        h = ops.softmax(self.gelu(f), -1) + ops.log_softmax(f, 1)        # GeLU, Softmax, LogSoftmax, Add
        return ops.concat((h[:, :2, :] + g, e), 1)                       # [2, 4, 12]


class Attention(nn.Cell):
    """A transformer encoder block (pre-norm multi-head self-attention and a GeLU feed-forward) over [N, T, D]
    tokens, pooled over T and classified."""

    def __init__(self, dim: int = 16, heads: int = 4, classes: int = 10):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.norm1, self.norm2 = nn.LayerNorm((dim,)), nn.LayerNorm((dim,))
        self.qkv, self.proj = nn.Dense(dim, 3 * dim), nn.Dense(dim, dim)
        self.ffn = nn.SequentialCell(nn.Dense(dim, 2 * dim), nn.GELU(), nn.Dense(2 * dim, dim))
        self.head = nn.Dense(dim, classes)

    def construct(self, x):
        n, t, d = x.shape
        qkv = ops.transpose(ops.reshape(self.qkv(self.norm1(x)), (n, t, 3, self.heads, self.head_dim)),
                            (2, 0, 3, 1, 4))
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = ops.softmax(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / float(np.sqrt(self.head_dim)), -1)
        x = x + self.proj(ops.reshape(ops.transpose(ops.matmul(scores, v), (0, 2, 1, 3)), (n, t, d)))
        x = x + self.ffn(self.norm2(x))
        return self.head(ops.mean(x, 1))


class Upsampler(nn.Cell):
    """Transposed convolutions in each pad mode ("same", "pad", "valid" with groups), as a decoder uses them."""

    def __init__(self):
        super().__init__()
        self.up = nn.SequentialCell(
            nn.Conv2dTranspose(4, 3, 3, stride=2, pad_mode="same", has_bias=True), nn.ReLU(),
            nn.Conv2dTranspose(3, 2, 4, stride=2, pad_mode="pad", padding=1),
            nn.Conv2dTranspose(2, 2, 3, stride=1, pad_mode="valid", group=2))

    def construct(self, x):
        return self.up(x)


class GRU(nn.Cell):
    """A GRU over [N, T, F] features (MindSpore unrolls it into elementary primitives)."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 6, batch_first=True)

    def construct(self, x):
        return self.gru(x)[0]


class Recurrent(nn.Cell):
    """A two-layer bidirectional LSTM over [N, T, F] features, classified from its last step (the initial state
    given, as MindSpore 1.0 requires)."""

    def __init__(self, features: int = 8, hidden: int = 6, classes: int = 10, batch: int = 2, layers: int = 2):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=layers, batch_first=True, bidirectional=True)
        self.head = nn.Dense(2 * hidden, classes)
        zeros = ms.Tensor(np.zeros((2 * layers, batch, hidden), np.float32))
        self.state = (zeros, zeros)
        self.flatten = nn.Flatten()

    def construct(self, x):       # [:, -1:] flattened: MindSpore 1.0 reads [:, -1] as an empty slice
        return self.head(self.flatten(self.lstm(x, self.state)[0][:, -1:]))


class Branches(nn.Cell):
    """An if/else on a value known only at run time (a Switch of two graphs: our If) and a loop of constant
    count (unrolled by MindSpore)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 4)

    def construct(self, x):
        if x.sum() > 0:
            x = self.fc(x)
        else:
            x = x * 2
        for _ in range(3):
            x = ops.relu(x) - 0.1
        return x


class WhileLoop(nn.Cell):
    """A loop whose count depends on the data (MindSpore: a header graph calling itself through its body)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 4)

    def construct(self, x):
        y = x
        while ops.abs(y).sum() < 20:
            y = ops.tanh(self.fc(y)) * 2 + y
        return y - x


class MorePrimitives(nn.Cell):
    """Split, Slice, PadV3, Tile, Argmax, ClampScalar, Pow, Erf on [2, 4, 6, 8] inputs, flattened and joined."""

    def construct(self, x):
        a, b = ops.split(x, 4, axis=3)
        c = ops.slice(x, (0, 1, 0, 0), (2, 2, 6, 8))
        parts = (ops.pad(a, (1, 1, 2, 0), value=0.5), ops.tile(b, (1, 1, 1, 2)),
                 ops.argmax(x, dim=1).astype(ms.float32), ops.maximum(ops.exp(-c), ops.sqrt(ops.abs(c))) ** 2,
                 ops.clip(x, -0.5, 0.5), ops.erf(x))
        return ops.concat([ops.reshape(p, (2, -1)) for p in parts], 1)


class Resizes(nn.Cell):
    """Nearest and bilinear resizes to a size of other ratios per axis, in each corner convention."""

    def __init__(self):
        super().__init__()
        flags = ((False, False), (True, False), (False, True))
        self.resizes = [cls(*f) for cls in (ops.ResizeNearestNeighborV2, ops.ResizeBilinearV2) for f in flags]

    def construct(self, x):
        return ops.concat([ops.reshape(r(x, (9, 13)), (2, -1)) for r in self.resizes], 1)


class Elementwise(nn.Cell):
    """Activations, unary math, reductions, comparisons and logic, ops.dense and a dilated convolution, on
    [2, 4, 6, 8] inputs, flattened and joined."""

    def __init__(self):
        super().__init__()
        self.acts = [nn.ELU(), nn.HSigmoid(), nn.SiLU(), ops.Softplus(), nn.Mish(), nn.SeLU(), nn.LeakyReLU(0.2)]
        self.conv = nn.Conv2d(4, 3, 3, pad_mode="pad", padding=2, dilation=2, has_bias=True)
        self.w = ms.Parameter(ms.Tensor(np.linspace(-1, 1, 40).reshape(5, 8).astype(np.float32)), name="w")
        self.b = ms.Parameter(ms.Tensor(np.linspace(0, 1, 5).astype(np.float32)), name="b")

    def construct(self, x):
        parts = [a(x) for a in self.acts]
        parts += [ops.rsqrt(ops.abs(x) + 0.5), ops.square(x), ops.addn((x, x, -x)), self.conv(x),
                  ops.dense(x, self.w, self.b), ops.amax(x, 1), ops.amin(x, (2, 3), True), ops.prod(x, 3),
                  ops.sum(x, 2), ops.logical_not(ops.logical_and(x > 0, x <= 1)).astype(ms.float32),
                  ops.logical_or(x == 0, x >= 0.5).astype(ms.float32), ops.minimum(x, 0.3),
                  ops.stop_gradient(x) / (ops.abs(x) + 1), ops.pow(ops.abs(x), x), ops.exp(x) - ops.log(x * x + 1)]
        return ops.concat([ops.reshape(p, (2, -1)) for p in parts], 1)


NETS = {"lenet": (LeNet, (2, 1, 32, 32)), "resnet": (SmallResNet, (2, 3, 32, 32)),
        "mobilenetv2": (MobileNetV2Like, (2, 3, 32, 32)), "primitives": (Primitives, (2, 4, 6, 8)),
        "attention": (Attention, (2, 5, 16)), "upsampler": (Upsampler, (2, 4, 5, 5)),
        "recurrent": (Recurrent, (2, 7, 8)), "branches": (Branches, (2, 4)),
        "loop": (WhileLoop, (2, 4)), "more_primitives": (MorePrimitives, (2, 4, 6, 8)),
        "resizes": (Resizes, (2, 3, 6, 8)), "gru": (GRU, (2, 3, 8)),
        "elementwise": (Elementwise, (2, 4, 6, 8)),
        # narrower LeNet and ResNet: their exported training steps are small enough to commit
        "bilstm": (partial(Recurrent, layers=1), (2, 7, 8)),      # MindSpore 1.0's CPU LSTM has one layer
        "narrow_lenet": (partial(LeNet, widths=(4, 8, 32, 16)), (2, 1, 32, 32)),
        "narrow_resnet": (partial(SmallResNet, width=8), (2, 3, 32, 32))}
CLASSIFIERS = ("lenet", "resnet", "mobilenetv2", "attention", "recurrent")     # trained on [N] class labels


def randomized(net: nn.Cell, seed: int) -> nn.Cell:
    """`net` with BatchNorm statistics and affine parameters drawn at random, so that inference exercises them."""
    rng = np.random.default_rng(seed)
    for name, p in net.parameters_and_names():
        if "moving_variance" in name or "gamma" in name:
            p.set_data(ms.Tensor(rng.uniform(0.5, 1.5, p.shape).astype(np.float32)))
        elif "moving_mean" in name or "beta" in name:
            p.set_data(ms.Tensor(rng.uniform(-0.5, 0.5, p.shape).astype(np.float32)))
    return net
