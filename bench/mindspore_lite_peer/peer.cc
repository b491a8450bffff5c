// The real MindSpore Lite 2.0 C++ runtime as a peer of bench_inference.py (built by peer.py beside it).
//
//   peer convert MODEL.onnx OUT_PREFIX INPUT N,C,H,W [SAVE_TYPE [INPUT_FORMAT [CONFIG_FILE]]]
//       -> OUT_PREFIX.mindir (SAVE_TYPE MINDIR, the default) or OUT_PREFIX.ms (MINDIR_LITE, the device format):
//          input INPUT fixed to that shape; INPUT_FORMAT NCHW (the default) keeps it as the ONNX model has it,
//          NHWC is the converter's own default (Transpose nodes inserted after the input); CONFIG_FILE is
//          converter_lite's --configFile (quantization: [common_quant_param], [data_preprocess_param], ...)
//   peer run MODEL.mindir|MODEL.ms INPUT.bin SHAPE WARMUP RUNS OUTPUT.bin [--spawned-at=...]
//
// `run` reads the raw input (of the type the model takes), resizes the model's input to the shape when it differs,
// runs once (the cold start's end), then WARMUP untimed and RUNS timed calls — each call copies the input in,
// predicts and copies the output out, as the Python runners do — and prints one JSON line like bench/harness.py's
// workers:
// {"first_output": <epoch seconds>, "times": [<ms>...]}. It writes the first call's outputs, raw and one after
// the other in the model's output order, to OUTPUT.bin.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "include/api/context.h"
#include "include/api/model.h"
#include "include/api/types.h"
#include "include/registry/converter_context.h"

namespace mindspore {
// The wheel exports the converter but ships no header: these members match its symbols (`nm -DC`); the class holds
// one shared_ptr to its parameters, as the library was built with.
struct ConverterPara;
class Converter {
 public:
  Converter();
  void SetInputFormat(Format format);
  void SetInputShape(const std::map<std::vector<char>, std::vector<int64_t>> &input_shape);
  void SetSaveType(ModelType save_type);
  void SetConfigFile(const std::vector<char> &config_file);
  Status Convert(converter::FmkType fmk_type, const std::vector<char> &model_file,
                 const std::vector<char> &output_file, const std::vector<char> &weight_file);

 private:
  std::shared_ptr<ConverterPara> data_;
};

// Full quantization calibrates by exporting the graph as an `.ms` buffer and building a Model from it with
// ModelType kMindIR. A device build of MindSpore Lite loads such buffers under either type; this wheel's cloud
// runtime takes kMindIR for the protobuf MINDIR and fails ("LoadMindIR] ParseFromArray failed", then
// "full_quant_quantizer.cc:635] DoQuantize] Build model failed"). The converter library calls Model::Build through
// its PLT, so this program's own definition comes first: it passes MSL2 buffers on as kMindIR_Lite to the
// library's, and everything else unchanged.
Status Model::Build(const void *model_data, size_t data_size, ModelType model_type,
                    const std::shared_ptr<Context> &model_context) {
  using BuildFn = Status (*)(Model *, const void *, size_t, ModelType, const std::shared_ptr<Context> &);
  static auto library_build = reinterpret_cast<BuildFn>(
    dlsym(RTLD_NEXT, "_ZN9mindspore5Model5BuildEPKvmNS_9ModelTypeERKSt10shared_ptrINS_7ContextEE"));
  if (library_build == nullptr) return Status(kLiteError, "Model::Build not found in the MindSpore Lite libraries");
  bool flatbuffer = data_size >= 8 && std::memcmp(static_cast<const char *>(model_data) + 4, "MSL2", 4) == 0;
  return library_build(this, model_data, data_size, flatbuffer && model_type == kMindIR ? kMindIR_Lite : model_type,
                       model_context);
}

namespace lite {
// The wheel's runtime shares packed weights between models (SHARING_MODEL_WEIGHT): a kernel packs a constant into
// a buffer found by the constant's address in the loaded file. A weight-quant file's constants are dequantized
// into new memory after that table is made, so the lookup fails ("pack_weight.cc:200] GetPackData] can not find
// tensor data in origin tensor data", then "matmul_fp32_base.cc:259] PackMatrixB] matrix b pack ptr is
// nullptr") and the model does not load. Where the lookup fails this gives the kernel a buffer of its own, as a
// build without weight sharing always does (PackWeightManager::MallocData); it lives as long as the process.
class PackWeight {
 public:
  void *GetPackData(const void *tensor_data, size_t size, bool *is_packed);
};

void *PackWeight::GetPackData(const void *tensor_data, size_t size, bool *is_packed) {
  using GetPackDataFn = void *(*)(PackWeight *, const void *, size_t, bool *);
  static auto library_get = reinterpret_cast<GetPackDataFn>(
    dlsym(RTLD_NEXT, "_ZN9mindspore4lite10PackWeight11GetPackDataEPKvmPb"));
  void *packed = library_get == nullptr ? nullptr : library_get(this, tensor_data, size, is_packed);
  if (packed != nullptr || tensor_data == nullptr || size == 0) return packed;
  *is_packed = false;
  constexpr size_t kAlign = 64;
  return std::aligned_alloc(kAlign, (size + kAlign - 1) / kAlign * kAlign);
}
}  // namespace lite
}  // namespace mindspore

namespace {
constexpr int kThreads = 2;  // as every engine of the bench

std::vector<char> chars(const std::string &s) { return {s.begin(), s.end()}; }

int fail(const std::string &what) {
  std::cerr << what << std::endl;
  return 1;
}

std::vector<int64_t> parse_shape(const std::string &text) {
  std::vector<int64_t> shape;
  std::stringstream in(text);
  for (std::string dim; std::getline(in, dim, ',');) shape.push_back(std::stoll(dim));
  return shape;
}

bool ends_with(const std::string &text, const std::string &tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

int convert(const std::string &onnx, const std::string &prefix, const std::string &input,
            const std::vector<int64_t> &shape, const std::string &save_type, const std::string &input_format,
            const std::string &config_file) {
  if ((save_type != "MINDIR" && save_type != "MINDIR_LITE") || (input_format != "NCHW" && input_format != "NHWC"))
    return fail("SAVE_TYPE is MINDIR or MINDIR_LITE, INPUT_FORMAT is NCHW or NHWC");
  mindspore::Converter converter;
  converter.SetInputFormat(input_format == "NCHW" ? mindspore::NCHW : mindspore::NHWC);
  converter.SetInputShape({{chars(input), shape}});
  converter.SetSaveType(save_type == "MINDIR" ? mindspore::kMindIR : mindspore::kMindIR_Lite);
  if (!config_file.empty()) converter.SetConfigFile(chars(config_file));
  auto status = converter.Convert(mindspore::converter::kFmkTypeOnnx, chars(onnx), chars(prefix), chars(""));
  return status == mindspore::kSuccess ? 0 : fail("convert failed: " + status.ToString());
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int run(const std::string &mindir, const std::string &input_path, const std::vector<int64_t> &shape, int warmup,
        int runs, const std::string &output_path) {
  auto context = std::make_shared<mindspore::Context>();
  context->SetThreadNum(kThreads);
  context->SetInterOpParallelNum(1);
  context->SetThreadAffinity(0);  // no core binding, as the other engines
  context->MutableDeviceInfo().push_back(std::make_shared<mindspore::CPUDeviceInfo>());
  mindspore::Model model;
  auto status = model.Build(mindir, ends_with(mindir, ".ms") ? mindspore::kMindIR_Lite : mindspore::kMindIR, context);
  if (status != mindspore::kSuccess) return fail("build failed: " + status.ToString());
  auto inputs = model.GetInputs();
  if (inputs.size() != 1) return fail("expected one input");
  if (inputs[0].Shape() != shape) {
    status = model.Resize(inputs, {shape});
    if (status != mindspore::kSuccess) return fail("resize failed: " + status.ToString());
    inputs = model.GetInputs();
  }
  std::vector<char> x(inputs[0].DataSize());
  std::ifstream in(input_path, std::ios::binary);
  if (!in.read(x.data(), static_cast<std::streamsize>(x.size()))) return fail("input file too short");
  std::vector<char> y;
  auto call = [&]() {
    std::memcpy(inputs[0].MutableData(), x.data(), x.size());
    std::vector<mindspore::MSTensor> outputs;
    if (model.Predict(inputs, &outputs) != mindspore::kSuccess || outputs.empty()) return false;
    y.clear();
    for (auto &output : outputs) {
      auto data = static_cast<const char *>(output.Data().get());
      y.insert(y.end(), data, data + output.DataSize());
    }
    return true;
  };
  if (!call()) return fail("predict failed");
  double first = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::ofstream(output_path, std::ios::binary).write(y.data(), static_cast<std::streamsize>(y.size()));
  for (int i = 0; i < warmup; ++i) call();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    double start = now_ms();
    if (!call()) return fail("predict failed");
    times.push_back(now_ms() - start);
  }
  std::printf("{\"first_output\": %.6f, \"times\": [", first);
  for (size_t i = 0; i < times.size(); ++i) std::printf(i ? ", %.4f" : "%.4f", times[i]);
  std::printf("]}\n");
  return 0;
}
}  // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 5 && args.size() <= 8 && args[0] == "convert")
    return convert(args[1], args[2], args[3], parse_shape(args[4]), args.size() > 5 ? args[5] : "MINDIR",
                   args.size() > 6 ? args[6] : "NCHW", args.size() > 7 ? args[7] : "");
  if (args.size() >= 7 && args[0] == "run")
    return run(args[1], args[2], parse_shape(args[3]), std::stoi(args[4]), std::stoi(args[5]), args[6]);
  return fail("usage: peer convert MODEL.onnx OUT_PREFIX INPUT N,C,H,W [MINDIR|MINDIR_LITE [NCHW|NHWC]] | "
              "peer run MODEL.mindir|MODEL.ms INPUT.bin SHAPE WARMUP RUNS OUTPUT.bin");
}
