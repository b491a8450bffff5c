// How the official training files here were made: MindSpore Lite 2.0.0's converter with --trainModel=true.
//
//   train_convert MODEL.mindir OUT_PREFIX   -> OUT_PREFIX.ms (MINDIR_LITE, a training model)
//
// MODEL.mindir is MindSpore 2.0's export of TrainOneStepCell(WithLossCell(net, sparse softmax cross entropy),
// Momentum(0.01, 0.9) or SGD(0.01, 0.9)) after one step: `python -m tests.converter.frontends.mindir.oracle`'s
// `export_step` (STEPS step_lenet_momentum and step_resnet_momentum; lenet_sgd: OPTIMIZERS["sgd"] = nn.SGD(params,
// 0.01, 0.9) on narrow_lenet; lenet_adam and act_lenet_momentum: `export_steps.py` here) run under MindSpore 2.0.0,
// whose npz are the .npz files here. Built like
// bench/mindspore_lite_peer/peer.cc, against the wheel that bench/mindspore_lite_peer/peer.py unpacks (R = its
// mindspore_lite directory):
//
//   g++ -std=c++17 -O1 -D_GLIBCXX_USE_CXX11_ABI=0 -I$R train_convert.cc -o train_convert -L$R/lib \
//       -lmindspore-extendrt_python -lmindspore_converter -lmindspore_core -Wl,--disable-new-dtags,-rpath,$R/lib
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "include/api/context.h"
#include "include/api/model.h"
#include "include/api/status.h"
#include "include/api/types.h"
#include "include/registry/converter_context.h"

namespace mindspore {
// The wheel exports the converter but ships no header: these members match its symbols (`nm -DC`).
struct ConverterPara;
class Converter {
 public:
  Converter();
  void SetSaveType(ModelType save_type);
  void SetTrainModel(bool train_model);
  Status Convert(converter::FmkType fmk_type, const std::vector<char> &model_file,
                 const std::vector<char> &output_file, const std::vector<char> &weight_file);

 private:
  std::shared_ptr<ConverterPara> data_;
};
}  // namespace mindspore

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: train_convert MODEL.mindir OUT_PREFIX" << std::endl;
    return 1;
  }
  auto chars = [](const std::string &s) { return std::vector<char>(s.begin(), s.end()); };
  mindspore::Converter converter;
  converter.SetSaveType(mindspore::kMindIR_Lite);
  converter.SetTrainModel(true);
  auto status = converter.Convert(mindspore::converter::kFmkTypeMs, chars(argv[1]), chars(argv[2]), chars(""));
  if (status != mindspore::kSuccess) {
    std::cerr << "convert failed: " << status.ToString() << std::endl;
    return 1;
  }
  return 0;
}
