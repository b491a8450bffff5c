"""Stream audio chunk by chunk through a stateful TFLite voice-activity detector whose state lives in the model.

    python examples/stream_audio.py [--seconds 3] [--keep DIR]

Streaming audio models (wake-word spotters, VADs) exported by TFLite keep what they remember of earlier chunks in
resource variables: a CALL_ONCE subgraph gives them their initial value, READ_VARIABLE / ASSIGN_VARIABLE read and
write them on every invocation. This example writes such a model (no TensorFlow needed: the schema's builders of
the `tflite` package), converts it with `converter_lite`, and feeds it 20 ms chunks of a synthetic recording
(noise with two voiced stretches). The session keeps the state from one `RunGraph` to the next, as LiteRT does:

- each chunk: 16 DFT bands of the chunk -> log power; the state holds the last 7 chunks' bands, the detector
  averages 8 chunks (160 ms) and says how likely speech is;
- halfway, the session is saved (`SaveToFile`: the model with its state) and a fresh session loaded from that file
  continues; its outputs equal those of the session that went on;
- when LiteRT (`ai-edge-litert`) is installed, its interpreter runs the same file chunk by chunk as the reference.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import lite  # noqa: E402
from converter.cli import main as converter_lite  # noqa: E402

RATE, CHUNK, BANDS, CONTEXT = 16000, 320, 16, 8       # 20 ms chunks, 8 of them (160 ms) of context
SILENCE = 1e-6                                         # the power the state starts from (log of it)


# ---- a streaming VAD as a .tflite file ----------------------------------------------------------------------------
class TFLiteWriter:
    """A minimal `.tflite` writer over the `tflite` package's generated builders: tensors, operators and
    subgraphs, enough for this model."""

    def __init__(self) -> None:
        import tflite
        self.schema, self.buffers, self.codes, self.graphs = tflite, [None], [], []

    def graph(self) -> dict[str, list]:
        g: dict[str, list] = {"tensors": [], "ops": [], "inputs": [], "outputs": []}
        self.graphs.append(g)
        return g

    def tensor(self, g: dict, name: str, shape: tuple[int, ...], dtype: str = "FLOAT32",
               data: np.ndarray | None = None) -> int:
        if data is not None:
            self.buffers.append(np.ascontiguousarray(data))
        g["tensors"].append((name, shape, dtype, len(self.buffers) - 1 if data is not None else 0))
        return len(g["tensors"]) - 1

    def const(self, g: dict, name: str, array: np.ndarray) -> int:
        dtype = {np.dtype(np.float32): "FLOAT32", np.dtype(np.int32): "INT32"}[array.dtype]
        return self.tensor(g, name, array.shape, dtype, array)

    def op(self, g: dict, code: str, inputs: list[int], outputs: list[int], options: str | None = None,
           **fields: Any) -> None:
        if code not in self.codes:
            self.codes.append(code)
        g["ops"].append((self.codes.index(code), inputs, outputs, options, fields))

    def _table(self, b: Any, name: str, **fields: Any) -> int:
        module = __import__(f"tflite.{name}", fromlist=[name])
        getattr(module, f"{name}Start")(b)
        for key, value in fields.items():
            getattr(module, f"{name}Add{key}")(b, value)
        return getattr(module, f"{name}End")(b)

    def _offsets(self, b: Any, items: list[int]) -> int:
        b.StartVector(4, len(items), 4)
        for item in reversed(items):
            b.PrependUOffsetTRelative(item)
        return b.EndVector()

    def build(self) -> bytes:
        import flatbuffers
        b, s = flatbuffers.Builder(1024), self.schema
        ints = lambda values: b.CreateNumpyVector(np.asarray(values, np.int32))  # noqa: E731
        buffers = [self._table(b, "Buffer", **({} if d is None else {"Data": b.CreateNumpyVector(
            d.reshape(-1).view(np.uint8))})) for d in self.buffers]
        graphs = []
        for g in self.graphs:
            tensors = [self._table(b, "Tensor", Shape=ints(shape), Name=b.CreateString(name),
                                   Type=getattr(s.TensorType, dtype), Buffer=buffer)
                       for name, shape, dtype, buffer in g["tensors"]]
            ops = []
            for code, inputs, outputs, options, fields in g["ops"]:
                extra = {}
                if options is not None:
                    values = {k: b.CreateString(v) if isinstance(v, str) else ints(v) if isinstance(v, list) else v
                              for k, v in fields.items()}
                    extra = dict(BuiltinOptions=self._table(b, options, **values),
                                 BuiltinOptionsType=getattr(s.BuiltinOptions, options))
                ops.append(self._table(b, "Operator", OpcodeIndex=code, Inputs=ints(inputs), Outputs=ints(outputs),
                                       **extra))
            graphs.append(self._table(b, "SubGraph", Tensors=self._offsets(b, tensors), Inputs=ints(g["inputs"]),
                                      Outputs=ints(g["outputs"]), Operators=self._offsets(b, ops)))
        codes = [self._table(b, "OperatorCode", BuiltinCode=getattr(s.BuiltinOperator, c),
                             DeprecatedBuiltinCode=min(getattr(s.BuiltinOperator, c), 127), Version=1)
                 for c in self.codes]
        model = self._table(b, "Model", Version=3, OperatorCodes=self._offsets(b, codes),
                            Subgraphs=self._offsets(b, graphs), Buffers=self._offsets(b, buffers))
        b.Finish(model, file_identifier=b"TFL3")
        return bytes(b.Output())


def band_weights() -> tuple[np.ndarray, np.ndarray]:
    """A Hann-windowed DFT at 16 frequencies from 250 Hz to 4 kHz ([2 * BANDS, CHUNK]: cosines then sines) and
    the matrix summing each band's squared cosine and sine parts ([BANDS, 2 * BANDS])."""
    n, freqs = np.arange(CHUNK), np.linspace(250, 4000, BANDS)
    window = np.hanning(CHUNK)
    phase = 2 * np.pi * freqs[:, None] * n[None, :] / RATE
    dft = np.concatenate([np.cos(phase), np.sin(phase)]) * window
    return dft.astype(np.float32), np.concatenate([np.eye(BANDS), np.eye(BANDS)], axis=1).astype(np.float32)


def streaming_vad(threshold: float = -3.6, slope: float = 3.0) -> bytes:
    """chunk [1, CHUNK] -> speech probability [1, 1]; the state, a resource variable 'vad/bands' [1, CONTEXT-1,
    BANDS], holds the log band powers of the chunks before."""
    w, g = TFLiteWriter(), None
    main, init = w.graph(), w.graph()
    state = (1, CONTEXT - 1, BANDS)
    handle = w.tensor(init, "init/handle", (), "RESOURCE")                    # subgraph 1: the initial state
    w.op(init, "VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="vad/bands")
    w.op(init, "ASSIGN_VARIABLE", [handle, w.const(init, "init/silence", np.full(state, np.log(SILENCE),
                                                                                 np.float32))], [])
    g = main
    t = lambda name, shape: w.tensor(g, name, shape)  # noqa: E731
    dft, pairs = band_weights()
    chunk = t("chunk", (1, CHUNK))
    w.op(g, "CALL_ONCE", [], [], "CallOnceOptions", InitSubgraphIndex=1)
    parts, squares, power = t("vad/dft", (1, 2 * BANDS)), t("vad/squares", (1, 2 * BANDS)), t("vad/power", (1, BANDS))
    w.op(g, "FULLY_CONNECTED", [chunk, w.const(g, "vad/dft_weights", dft), -1], [parts], "FullyConnectedOptions")
    w.op(g, "MUL", [parts, parts], [squares], "MulOptions")
    w.op(g, "FULLY_CONNECTED", [squares, w.const(g, "vad/pairs", pairs), -1], [power], "FullyConnectedOptions")
    floor, logs, frame = t("vad/floored", (1, BANDS)), t("vad/log_power", (1, BANDS)), t("vad/frame", (1, 1, BANDS))
    w.op(g, "ADD", [power, w.const(g, "vad/silence", np.full((1,), SILENCE, np.float32))], [floor], "AddOptions")
    w.op(g, "LOG", [floor], [logs])
    w.op(g, "RESHAPE", [logs, w.const(g, "vad/frame_shape", np.array([1, 1, BANDS], np.int32))], [frame])
    handle, before = w.tensor(g, "vad/handle", (), "RESOURCE"), t("vad/before", state)
    window, after = t("vad/window", (1, CONTEXT, BANDS)), t("vad/after", state)
    w.op(g, "VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="vad/bands")
    w.op(g, "READ_VARIABLE", [handle], [before])
    w.op(g, "CONCATENATION", [before, frame], [window], "ConcatenationOptions", Axis=1)
    w.op(g, "SLICE", [window, w.const(g, "vad/begin", np.array([0, 1, 0], np.int32)),
                      w.const(g, "vad/size", np.array(state, np.int32))], [after])
    w.op(g, "ASSIGN_VARIABLE", [handle, after], [])
    mean, score, speech = t("vad/mean", (1, BANDS)), t("vad/score", (1, 1)), t("speech", (1, 1))
    w.op(g, "MEAN", [window, w.const(g, "vad/axis", np.array([1], np.int32))], [mean], "ReducerOptions")
    weights = np.full((1, BANDS), slope / BANDS, np.float32)
    w.op(g, "FULLY_CONNECTED", [mean, w.const(g, "vad/detector", weights),
                                w.const(g, "vad/bias", np.array([-slope * threshold], np.float32))], [score],
         "FullyConnectedOptions")
    w.op(g, "LOGISTIC", [score], [speech])
    g["inputs"], g["outputs"] = [chunk], [speech]
    return w.build()


# ---- the recording --------------------------------------------------------------------------------------------------
def recording(seconds: float, seed: int = 0) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Background noise with two voiced stretches (a 140 Hz voice with its harmonics, syllables at 4 Hz);
    returns the samples and the voiced stretches in seconds."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    audio = rng.normal(0, 0.01, t.size)
    voiced = [(seconds * 0.2, seconds * 0.43), (seconds * 0.63, seconds * 0.83)]
    for start, end in voiced:
        inside = (t >= start) & (t < end)
        syllables = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t[inside]) ** 2
        voice = sum(np.sin(2 * np.pi * 140 * h * t[inside]) / h for h in range(1, 20))
        audio[inside] += 0.15 * syllables * voice
    return audio.astype(np.float32), voiced


# ---- streaming ------------------------------------------------------------------------------------------------------
def open_session(path: Path) -> lite.LiteSession:
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    session.CompileGraph(lite.Model.Load(path))
    return session


def step(session: lite.LiteSession, chunk: np.ndarray) -> float:
    session.GetInputs()[0].set_data(chunk.reshape(1, CHUNK))
    session.RunGraph()
    return float(session.GetOutputByTensorName("speech").numpy()[0, 0])


def litert_steps(tflite_path: Path, chunks: np.ndarray) -> np.ndarray | None:
    """LiteRT's interpreter on the same chunks, one invocation each (None when ai-edge-litert is absent)."""
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        return None
    interpreter = Interpreter(model_path=str(tflite_path),
                              experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interpreter.allocate_tensors()
    (source,), (result,) = interpreter.get_input_details(), interpreter.get_output_details()
    outputs = []
    for chunk in chunks:
        interpreter.set_tensor(source["index"], chunk.reshape(1, CHUNK))
        interpreter.invoke()
        outputs.append(float(interpreter.get_tensor(result["index"])[0, 0]))
    return np.array(outputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of the synthetic recording")
    parser.add_argument("--keep", type=Path, help="write the .tflite, .ms and checkpoint here (default: a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        tflite_path = folder / "streaming_vad.tflite"
        tflite_path.write_bytes(streaming_vad())
        if converter_lite(["--fmk=TFLITE", f"--modelFile={tflite_path}", f"--outputFile={folder / 'streaming_vad'}"]):
            return 1
        audio, voiced = recording(args.seconds)
        chunks = audio[: audio.size // CHUNK * CHUNK].reshape(-1, CHUNK)
        print(f"{len(chunks)} chunks of {CHUNK * 1000 // RATE} ms; voiced "
              + ", ".join(f"{a:.2f}-{b:.2f} s" for a, b in voiced))
        session, half = open_session(folder / "streaming_vad.ms"), len(chunks) // 2
        start, ours, speaking = time.perf_counter(), [], False
        for k, chunk in enumerate(chunks):
            p = step(session, chunk)
            ours.append(p)
            if (p > 0.5) != speaking:
                speaking = p > 0.5
                print(f"  {(k + 1) * CHUNK / RATE:5.2f} s  speech {'starts' if speaking else 'ends'} (p = {p:.2f})")
            if k + 1 == half:
                session.SaveToFile(folder / "checkpoint.ms")
                print(f"  {(k + 1) * CHUNK / RATE:5.2f} s  session saved with its state: checkpoint.ms")
        seconds = time.perf_counter() - start
        print(f"streamed {len(chunks)} chunks in {seconds * 1000:.0f} ms ({seconds * 1e6 / len(chunks):.0f} us a "
              f"chunk)")
        resumed = open_session(folder / "checkpoint.ms")
        rest = [step(resumed, chunk) for chunk in chunks[half:]]
        same = np.array_equal(rest, ours[half:])
        print(f"resumed from checkpoint.ms: the last {len(rest)} outputs "
              f"{'equal the uninterrupted run' if same else 'DIFFER from the uninterrupted run'}")
        reference = litert_steps(tflite_path, chunks)
        if reference is None:
            print("LiteRT not installed (pip install ai-edge-litert): no reference run")
        else:
            print(f"LiteRT, chunk by chunk: max difference {np.abs(reference - ours).max():.1e} over "
                  f"{len(chunks)} chunks")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
