"""Record the reference outputs of face_landmark_with_attention.tflite as MediaPipe's own runtime computes them.

LiteRT has no kernel for the model's three transform ops (Landmarks2TransformMatrix, TransformTensorBilinear,
TransformLandmarks); MediaPipe's InferenceCalculator runs them with its custom-op resolver. This script is run
with MediaPipe's Python, in a separate environment (mediapipe pulls its own dependencies, which the main one must
not get), and writes the fixture that tests/converter/frontends/tflite/test_mediapipe_transforms.py compares with:

    python -m venv /tmp/mpenv && /tmp/mpenv/bin/pip install mediapipe==0.10.14
    /tmp/mpenv/bin/python tests/converter/frontends/tflite/mediapipe_face_oracle.py \\
        "$(python -c 'import skimage, os; print(os.path.join(os.path.dirname(skimage.__file__), "data", "astronaut.png"))')"

The graph: ImageToTensorCalculator (the whole 192x192 image, values in [0, 1]: the identity crop, so the tensor is
the image / 255), InferenceCalculator (the plain TFLite CPU path, MediaPipe's op resolver), then every output
tensor split off and read as floats.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

MODEL = "mediapipe/modules/face_landmark/face_landmark_with_attention.tflite"
OUTPUTS = 7
# name, top, left (192x192 crops of scikit-image's astronaut photo), quarter turns, mirrored
CROPS = [("upright", 30, 150, 0, False), ("shifted", 10, 130, 0, False), ("turned", 30, 150, 1, False),
         ("mirrored", 30, 150, 0, True)]
FIXTURE = Path(__file__).with_name("fixtures") / "face_landmark_with_attention_mediapipe.npz"


def crop(photo: np.ndarray, top: int, left: int, turns: int, mirrored: bool) -> np.ndarray:
    image = np.rot90(photo[top:top + 192, left:left + 192], turns)
    return np.ascontiguousarray(image[:, ::-1] if mirrored else image)


def graph_config() -> str:
    splits = "\n".join(f'  output_stream: "t{k}"' for k in range(OUTPUTS))
    ranges = " ".join(f"ranges: {{ begin: {k} end: {k + 1} }}" for k in range(OUTPUTS))
    floats = "\n".join(f'node {{ calculator: "TensorsToFloatsCalculator" input_stream: "TENSORS:t{k}" '
                       f'output_stream: "FLOATS:f{k}" }}\noutput_stream: "f{k}"' for k in range(OUTPUTS))
    return f"""
input_stream: "image"
node {{
  calculator: "ImageToTensorCalculator"
  input_stream: "IMAGE:image"
  output_stream: "TENSORS:input_tensors"
  options: {{ [mediapipe.ImageToTensorCalculatorOptions.ext] {{
      output_tensor_width: 192 output_tensor_height: 192 keep_aspect_ratio: false
      output_tensor_float_range {{ min: 0.0 max: 1.0 }} border_mode: BORDER_REPLICATE }} }}
}}
node {{ calculator: "TfLiteCustomOpResolverCalculator" output_side_packet: "OP_RESOLVER:op_resolver" }}
node {{
  calculator: "InferenceCalculator"
  input_stream: "TENSORS:input_tensors"
  input_side_packet: "OP_RESOLVER:op_resolver"
  output_stream: "TENSORS:output_tensors"
  options: {{ [mediapipe.InferenceCalculatorOptions.ext] {{ model_path: "{MODEL}" delegate {{ tflite {{}} }} }} }}
}}
node {{
  calculator: "SplitTensorVectorCalculator"
  input_stream: "output_tensors"
{splits}
  options: {{ [mediapipe.SplitVectorCalculatorOptions.ext] {{ {ranges} }} }}
}}
{floats}
"""


def run(image: np.ndarray) -> list[np.ndarray]:
    import mediapipe as mp
    graph = mp.CalculatorGraph(graph_config=graph_config())
    got: dict[str, np.ndarray] = {}
    for k in range(OUTPUTS):
        graph.observe_output_stream(f"f{k}", lambda name, packet: got.__setitem__(
            name, np.array(mp.packet_getter.get_float_list(packet), np.float32)))
    graph.start_run()
    frame = mp.packet_creator.create_image_frame(image_format=mp.ImageFormat.SRGB, data=image)
    graph.add_packet_to_input_stream("image", frame.at(1))
    graph.close()
    return [got[f"f{k}"] for k in range(OUTPUTS)]


def main() -> None:
    import cv2          # MediaPipe's environment has these; the tests import only CROPS and crop from here
    import mediapipe as mp
    from mediapipe.python._framework_bindings import resource_util
    resource_util.set_resource_dir(os.path.dirname(os.path.dirname(mp.__file__)))
    photo = cv2.cvtColor(cv2.imread(sys.argv[1], cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    arrays = {"crops": np.array([c[1:] for c in CROPS], np.int64), "names": np.array([c[0] for c in CROPS])}
    for name, *box in CROPS:
        for k, values in enumerate(run(crop(photo, *box))):
            arrays[f"{name}/{k}"] = values
    FIXTURE.parent.mkdir(exist_ok=True)
    np.savez_compressed(FIXTURE, mediapipe=np.array(mp.__version__), **arrays)
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size} bytes), mediapipe {mp.__version__}")


if __name__ == "__main__":
    main()
