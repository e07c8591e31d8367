// ExecuTorch programs exported with dynamic shapes (torch.export.Dim
// bounds) through a Session: any size up to the bound, each dim checked;
// every size its own plan, read again from the file (pte::load_at_sizes).
// The seed models with dynamic shapes are checked against PyTorch by the
// pte_models_vs_pytorch ctest (tests/data/pte/models).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "error_of.h"
#include "gpu_fixture.h"
#include "onnx/session.h"

using namespace wgnn;
using onnx_import::Session;
using test::error_of;
using testing::HasSubstr;

namespace {

// errors/dynamic_batch.pte: relu(linear(x, 8 -> 4)) * 2, x of [batch <= 16, 8].
const std::string kModel = std::string(WGNN_SOURCE_DIR) + "/tests/data/pte/errors/dynamic_batch.pte";

HostTensor rows(int64_t n) {
  HostTensor t(DType::F32, {n, 8});
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = std::sin(0.37f * float(i)) * 2.f;
  return t;
}

}  // namespace

TEST(PteDynamic, InputsDeclareTheirBound) {
  Session s(test::ctx(), kModel);
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].shape, (Shape{16, 8}));
  EXPECT_EQ(s.inputs()[0].max_shape, (Shape{16, 8}));
}

TEST(PteDynamic, EveryBatchUpToTheBoundRunsAndRowsAgree) {
  Session s(test::ctx(), kModel);
  const HostTensor full = s.run({{"input_0", rows(16)}}).at("output_0");
  ASSERT_EQ(full.shape, (Shape{16, 4}));
  // The rows are independent: a smaller batch gives the first rows of the
  // full one (the same values: row i's input is the same).
  for (int64_t n : {1, 3, 9, 0}) {
    const HostTensor part = s.run({{"input_0", rows(n)}}).at("output_0");
    ASSERT_EQ(part.shape, (Shape{n, 4})) << n;
    for (int64_t i = 0; i < part.numel(); ++i) {
      EXPECT_NEAR(part.as<float>()[i], full.as<float>()[i], 1e-5) << "batch " << n << ", element " << i;
    }
  }
  // Some outputs are positive: the rows checked are not all zeros (relu).
  int positive = 0;
  for (int64_t i = 0; i < full.numel(); ++i) positive += full.as<float>()[i] > 0;
  EXPECT_GT(positive, 8);
  // Five sets of sizes; those that record one structure share a plan's buffers.
  EXPECT_EQ(s.plan_sizes(), 5);
  EXPECT_LT(s.plans(), 5);
}

TEST(PteDynamic, BeyondTheBoundOrAnotherRankIsAnError) {
  Session s(test::ctx(), kModel);
  EXPECT_THAT(error_of([&] { s.run({{"input_0", rows(17)}}); }), HasSubstr("takes at most [16, 8]"));
  HostTensor wide(DType::F32, {2, 9});
  EXPECT_THAT(error_of([&] { s.run({{"input_0", wide}}); }), HasSubstr("takes at most [16, 8]"));
  HostTensor flat(DType::F32, {8});
  EXPECT_THAT(error_of([&] { s.run({{"input_0", flat}}); }), HasSubstr("takes at most [16, 8]"));
  // The session still runs after the errors.
  EXPECT_EQ(s.run({{"input_0", rows(2)}}).at("output_0").shape, (Shape{2, 4}));
}
