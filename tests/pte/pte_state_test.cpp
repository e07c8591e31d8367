// ExecuTorch programs with mutable buffers (a key/value cache written with
// index_copy_, kept by ExecuTorch from one run to the next) through a
// Session: the state carries over, a failed run leaves it as it was,
// reset_state() starts over. tests/data/pte/models/kv_decoder.pte
// (scripts/models/pte_fixtures.py); its steps against float64 PyTorch are in
// the pte_models_vs_pytorch ctest.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "error_of.h"
#include "gpu_fixture.h"
#include "onnx/session.h"

using namespace wgnn;
using onnx_import::Session;
using test::error_of;
using testing::HasSubstr;

namespace {

const std::string kModel = std::string(WGNN_SOURCE_DIR) + "/tests/data/pte/models/kv_decoder.pte";

HostTensor step(Session& s, int64_t tok, int64_t pos) {
  HostTensor t(DType::I64, {1, 1}), p(DType::I64, {1});
  t.as<int64_t>()[0] = tok;
  p.as<int64_t>()[0] = pos;
  return s.run({{"input_0", t}, {"input_1", p}}).at("output_0");
}

double max_diff(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, double(std::abs(a.as<float>()[i] - b.as<float>()[i])));
  return m;
}

}  // namespace

TEST(PteState, TheCacheIsStateNotAnInput) {
  Session s(test::ctx(), kModel);
  EXPECT_EQ(s.inputs().size(), 2u);
  EXPECT_EQ(s.outputs().size(), 1u);
  EXPECT_EQ(s.state_count(), 2u);  // keys and values
}

TEST(PteState, StepsSeeTheEarlierStepsAndResetStartsOver) {
  Session s(test::ctx(), kModel);
  const HostTensor a = step(s, 3, 0), b = step(s, 7, 1), c = step(s, 3, 2);
  // The same token at position 2 sees two written slots: not step 0's logits.
  EXPECT_GT(max_diff(a, c), 1e-3);
  s.reset_state();
  EXPECT_LT(max_diff(step(s, 3, 0), a), 1e-6);
  EXPECT_LT(max_diff(step(s, 7, 1), b), 1e-6);
}

TEST(PteState, AFailedRunLeavesTheStateAsItWas) {
  Session s(test::ctx(), kModel);
  const HostTensor a = step(s, 3, 0), b = step(s, 7, 1);
  s.reset_state();
  step(s, 3, 0);
  HostTensor wide(DType::I64, {1, 2});
  HostTensor p(DType::I64, {1});
  EXPECT_THAT(error_of([&] { s.run({{"input_0", wide}, {"input_1", p}}); }), HasSubstr("input_0"));
  EXPECT_LT(max_diff(step(s, 7, 1), b), 1e-6);
  (void)a;
}

TEST(PteState, StartIsRefused) {
  Session s(test::ctx(), kModel);
  HostTensor t(DType::I64, {1, 1}), p(DType::I64, {1});
  EXPECT_THAT(error_of([&] { s.start({{"input_0", t}, {"input_1", p}}); }), HasSubstr("state"));
}

// ExecuTorch's own LLM export (export_llama -kv --use_sdpa_with_kv_cache
// -V): a prompt of 3 tokens and three decode steps through one session
// against eager PyTorch's logits (the fixture's goldens), in two plans (the
// start position is read on the GPU).
TEST(PteState, ExecuTorchsLlmExportStepsMatchPyTorch) {
  const std::string dir = std::string(WGNN_SOURCE_DIR) + "/tests/data/pte/models/";
  const auto raw = [&](const std::string& name, DType dt, const Shape& shape) {
    std::ifstream f(dir + name, std::ios::binary);
    EXPECT_TRUE(f.good()) << name;
    HostTensor t(dt, shape);
    f.read(reinterpret_cast<char*>(t.data.data()), std::streamsize(t.nbytes()));
    return t;
  };
  Session s(test::ctx(), dir + "et_llama.pte");
  const int64_t lengths[4] = {3, 1, 1, 1};
  for (int i = 0; i < 4; ++i) {
    const std::string tag = "et_llama_step" + std::to_string(i);
    const HostTensor tok = raw(tag + ".in0.bin", DType::I64, {1, lengths[i]});
    const HostTensor pos = raw(tag + ".in1.bin", DType::I64, {1});
    const HostTensor want = raw(tag + ".golden.bin", DType::F32, {1, 128});
    const HostTensor got = s.run({{"input_0", tok}, {"input_1", pos}}).at("output_0");
    EXPECT_LT(max_diff(got, want), 1e-4) << tag;
  }
  EXPECT_EQ(s.builds(), 2);
}
