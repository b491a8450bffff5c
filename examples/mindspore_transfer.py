"""Transfer learning from MindSpore: a CNN trained in MindSpore, exported to MINDIR, fine-tuned on device.

    python examples/mindspore_transfer.py [--epochs 6] [--lr 0.01] [--out examples/results]
    python examples/mindspore_transfer.py --pretrain      # needs MindSpore: retrains and re-exports the network

The network (two convolutions, two dense layers, 10 outputs) was trained in MindSpore on scikit-learn's handwritten
digits 0-4 (8x8, scaled up to 16x16) and exported with `mindspore.export` to `examples/mindir/digits_0to4.mindir`
(`--pretrain` does it again). On device, `converter_lite --fmk=MINDIR --trainModel=true --trainable=fc.*` keeps
the convolutions MindSpore learnt and trains the dense layers on the digits 5-9, which the network has never seen:
`lite.TrainSession` runs the steps, the test accuracy on 5-9 is measured after every epoch, and the curve (loss per
step, test accuracy per epoch) is drawn to `<out>/mindspore_transfer.png`. The fine-tuned network is exported for
inference to `<out>/digits_transfer.ms` and checked once in a plain `LiteSession`. Exits 1 when the final test
accuracy is below 90 %.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

import lite  # noqa: E402
from converter import convert_for_training  # noqa: E402
from converter.frontends import read_model  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from lite.train.session import named  # noqa: E402

MODEL = REPO / "examples" / "mindir" / "digits_0to4.mindir"
BATCH = 25
SEEN, NEW = range(0, 5), range(5, 10)


def digits(classes: range, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits of `classes` as [N, 1, 16, 16] in [0, 1], split 2/3 train, 1/3 test, each a whole
    number of batches."""
    from sklearn.datasets import load_digits
    data = load_digits()
    keep = np.isin(data.target, list(classes))
    images = np.kron(data.images[keep] / 16, np.ones((2, 2))).astype(np.float32)[:, None]
    labels = data.target[keep].astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_train = len(order) * 2 // 3 // BATCH * BATCH
    n_test = (len(order) - n_train) // BATCH * BATCH
    train, test = order[:n_train], order[n_train:n_train + n_test]
    return images[train], labels[train], images[test], labels[test]


def pretrain(epochs: int = 30) -> None:
    """Train the network in MindSpore on the digits 0-4 and export it to MODEL (needs MindSpore)."""
    import mindspore as ms
    from mindspore import nn
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)

    class DigitsCNN(nn.Cell):
        def __init__(self):
            super().__init__()
            self.features = nn.SequentialCell(
                nn.Conv2d(1, 8, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2, 2),
                nn.Conv2d(8, 16, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten())
            self.fc1, self.relu, self.fc2 = nn.Dense(256, 32), nn.ReLU(), nn.Dense(32, 10)

        def construct(self, x):
            return self.fc2(self.relu(self.fc1(self.features(x))))

    net = DigitsCNN()
    x_train, y_train, x_test, y_test = digits(SEEN)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")),
                               nn.Adam(net.trainable_params(), 0.01))
    step.set_train(True)
    rng = np.random.default_rng(0)
    for _ in range(epochs):
        order = rng.permutation(len(y_train))
        for k in range(0, len(order), BATCH):
            batch = order[k:k + BATCH]
            step(ms.Tensor(x_train[batch]), ms.Tensor(y_train[batch]))
    net.set_train(False)
    accuracy = np.mean([net(ms.Tensor(x_test[k:k + BATCH])).asnumpy().argmax(1) == y_test[k:k + BATCH]
                        for k in range(0, len(y_test), BATCH)])
    ms.export(net, ms.Tensor(x_test[:BATCH]), file_name=str(MODEL.with_suffix("")), file_format="MINDIR")
    MODEL.chmod(0o644)
    print(f"MindSpore: test accuracy on the digits 0-4 {accuracy:.1%}; exported {MODEL.relative_to(REPO)}")


def predictions(session: lite.TrainSession, images: np.ndarray) -> np.ndarray:
    """The session's classes for `images`, batch by batch, in eval mode (then back to training)."""
    session.Eval()
    found = []
    for k in range(0, len(images), BATCH):
        session.GetInputsByTensorName("x").set_data(images[k:k + BATCH])
        session.RunGraph()
        found.append(next(iter(session.GetOutputs().values())).numpy().argmax(1))
    session.Train()
    return np.concatenate(found)


def fine_tune(epochs: int, learning_rate: float) -> tuple[lite.TrainSession, list[float], list[float]]:
    """Fine-tune the dense layers on the digits 5-9: (the session, the loss of every step, the test accuracy
    before training and after every epoch)."""
    params = TrainParams(optimizer="momentum", learning_rate=learning_rate, trainable=("fc.*",))
    buf = convert_for_training(read_model("MINDIR", MODEL), params)
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=2), True)
    rng = np.random.default_rng(1)
    weights = named(session.GetFeatureMaps())
    session.UpdateFeatureMaps([          # a new output layer: the old one answers 0-4 with confidence
        ("fc2.weight", (rng.standard_normal(weights["fc2.weight"].shape) * 0.05).astype(np.float32)),
        ("fc2.bias", np.zeros_like(weights["fc2.bias"]))])
    x_train, y_train, x_test, y_test = digits(NEW)
    accuracy = [float(np.mean(predictions(session, x_test) == y_test))]
    losses = []
    for _ in range(epochs):
        order = rng.permutation(len(y_train))
        for k in range(0, len(order), BATCH):
            batch = order[k:k + BATCH]
            session.GetInputsByTensorName("x").set_data(x_train[batch])
            session.GetInputsByTensorName("labels").set_data(y_train[batch])
            session.RunGraph()
            losses.append(float(session.GetOutputByTensorName("loss").numpy()))
        accuracy.append(float(np.mean(predictions(session, x_test) == y_test)))
        print(f"epoch {len(accuracy) - 1}: loss {np.mean(losses[-len(order) // BATCH:]):.3f}, test accuracy on the "
              f"digits 5-9 {accuracy[-1]:.1%}")
    return session, losses, accuracy


def save_curve(losses: list[float], accuracy: list[float], out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.plot(losses)
    left.set(xlabel="step", ylabel="training loss", title="fine-tuning on the digits 5-9")
    right.plot(range(len(accuracy)), accuracy, marker="o")
    right.set(xlabel="epoch", ylabel="test accuracy", ylim=(0, 1), title="network trained in MindSpore on 0-4")
    fig.tight_layout()
    path = out / "mindspore_transfer.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--out", type=Path, default=REPO / "examples" / "results")
    parser.add_argument("--pretrain", action="store_true", help="retrain and re-export the network (MindSpore)")
    args = parser.parse_args(argv)
    if args.pretrain:
        pretrain()
    session, losses, accuracy = fine_tune(args.epochs, args.lr)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"curve: {save_curve(losses, accuracy, args.out)}")
    exported = args.out / "digits_transfer.ms"
    session.Export(str(exported), lite.MT_INFERENCE)
    inference = lite.LiteSession.CreateSession(lite.Context())
    inference.CompileGraph(lite.Model.Load(str(exported)))
    _, _, x_test, y_test = digits(NEW)
    inference.GetInputsByTensorName("x").set_data(x_test[:BATCH])
    inference.RunGraph()
    agree = np.array_equal(next(iter(inference.GetOutputs().values())).numpy().argmax(1),
                           predictions(session, x_test[:BATCH]))
    print(f"exported {exported}: {'the same classes as the session' if agree else 'OTHER CLASSES than the session'}")
    return 0 if agree and accuracy[-1] >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
