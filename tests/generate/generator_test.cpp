// generate::Generator's run-time checks: steps are submitted without a wait,
// so their check flags are read with the tokens; a token id past the
// embedding table's rows must still fail the run, naming the node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "error_of.h"
#include "generate/generate.h"
#include "gpu_fixture.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using testing::HasSubstr;
using wgnn::test::ModelBuilder;

namespace {

// A decoder-only model in the past_key_values / present layout: the token's
// row of a 5-row table, appended to the cache; logits over 8 ids favour 7
// for every row, so the second step looks up row 7 of 5.
std::string decoder_past_table() {
  ModelBuilder b;
  b.input("input_ids", {-1, -1}, onnx::TensorProto::INT64, {"batch", "tokens"});
  b.input("past_key_values.0.key", {-1, 1, -1, 2}, onnx::TensorProto::FLOAT, {"batch", "", "past", ""});
  b.output("logits", {-1, -1, 8}, onnx::TensorProto::FLOAT, {"batch", "tokens", ""});
  b.output("present.0.key", {-1, 1, -1, 2}, onnx::TensorProto::FLOAT, {"batch", "", "length", ""});
  b.init_f32("table", {5, 2}, {1, 0, 1, 1, 1, 2, 1, 3, 1, 4});
  std::vector<float> w(16, 0.f);
  w[7] = 1.f;  // logits[j] = e[0] * w[0][j] + e[1] * w[1][j]: 1 for id 7, 0 otherwise
  b.init_f32("w", {2, 8}, w);
  b.init_i64("axes", {1});
  b.node("Gather", {"table", "input_ids"}, {"e"})->set_name("embed");
  b.node("Unsqueeze", {"e", "axes"}, {"e4"});
  ModelBuilder::attr_int(b.node("Concat", {"past_key_values.0.key", "e4"}, {"present.0.key"}), "axis", 2);
  b.node("MatMul", {"e", "w"}, {"logits"});
  return b.save("generator_past_table.onnx");
}

TEST(Generator, ACheckFailingInAStepNotWaitedForStopsTheRun) {
  generate::Models m;
  m.decoder = decoder_past_table();
  generate::Options o;
  o.max_new_tokens = 6;
  {
    generate::Generator gen(test::ctx(), m);
    EXPECT_THAT(test::error_of([&] { gen.run({{0, 1}}, o); }),
                HasSubstr("node 'embed' (Gather, opset 17): aten.index_select.default: index 7 is out of range"));
  }
  // Unchecked, the lookup is clamped (row 4) and the run goes on: six 7s.
  onnx_import::SessionOptions unchecked;
  unchecked.checked = false;
  generate::Generator gen(test::ctx(), m, unchecked);
  const generate::Result r = gen.run({{0, 1}}, o);
  ASSERT_EQ(r.tokens.size(), 1u);
  EXPECT_EQ(r.tokens[0], (std::vector<int64_t>(6, 7)));
  EXPECT_EQ(r.step_encode_us.size(), 5u);  // the parts of each step's host time
}

}  // namespace
