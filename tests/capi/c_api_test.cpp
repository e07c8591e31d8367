// The C API (include/wgnn/wgnn.h): a model from bytes and from a file, its
// inputs and outputs, a run, and every failure as a status with a message,
// NULL arguments included (no exception, no crash).
#include "wgnn/wgnn.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "onnx_model_builder.h"
#include "wgnn/version.h"

namespace {

// y = x * 3 + b over x of shape [N, 2], b a constant [2] = {10, 20}.
std::string affine_bytes() {
  wgnn::test::ModelBuilder b;
  b.input("x", {-1, 2});
  b.output("y", {-1, 2});
  b.init_f32("three", {}, {3.0f});
  b.init_f32("b", {2}, {10.0f, 20.0f});
  b.node("Mul", {"x", "three"}, {"t"});
  b.node("Add", {"t", "b"}, {"y"});
  std::string bytes;
  EXPECT_TRUE(b.m.SerializeToString(&bytes));
  return bytes;
}

class CApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(wgnn_context_create(nullptr, &ctx_), WGNN_OK) << wgnn_last_error();
  }
  static void TearDownTestSuite() {
    wgnn_context_destroy(ctx_);
    ctx_ = nullptr;
  }
  static wgnn_context* ctx_;
};
wgnn_context* CApi::ctx_ = nullptr;

TEST(CApiHost, VersionAndNames) {
  EXPECT_STREQ(wgnn_version(), WGNN_VERSION_STRING);
  EXPECT_STREQ(wgnn_status_name(WGNN_ERROR_MODEL), "WGNN_ERROR_MODEL");
  EXPECT_EQ(wgnn_dtype_size(WGNN_DTYPE_FLOAT16), 2u);
  EXPECT_EQ(wgnn_dtype_size(static_cast<wgnn_dtype>(42)), 0u);
}

TEST(CApiHost, TensorsCheckTheirArguments) {
  const int64_t shape[2] = {2, 3};
  const float data[6] = {1, 2, 3, 4, 5, 6};
  wgnn_tensor* t = nullptr;
  ASSERT_EQ(wgnn_tensor_create(WGNN_DTYPE_FLOAT32, shape, 2, data, sizeof data, &t), WGNN_OK);
  EXPECT_EQ(wgnn_tensor_dtype(t), WGNN_DTYPE_FLOAT32);
  EXPECT_EQ(wgnn_tensor_rank(t), 2u);
  EXPECT_EQ(wgnn_tensor_shape(t)[1], 3);
  EXPECT_EQ(wgnn_tensor_numel(t), 6);
  EXPECT_EQ(wgnn_tensor_size(t), sizeof data);
  EXPECT_EQ(std::memcmp(wgnn_tensor_data(t), data, sizeof data), 0);
  wgnn_tensor_destroy(t);

  wgnn_tensor* z = nullptr;
  ASSERT_EQ(wgnn_tensor_create(WGNN_DTYPE_INT64, shape, 2, nullptr, 0, &z), WGNN_OK);  // zeros
  EXPECT_EQ(static_cast<const int64_t*>(wgnn_tensor_data(z))[5], 0);
  wgnn_tensor_destroy(z);
  wgnn_tensor* scalar = nullptr;
  ASSERT_EQ(wgnn_tensor_create(WGNN_DTYPE_FLOAT32, nullptr, 0, nullptr, 0, &scalar), WGNN_OK);
  EXPECT_EQ(wgnn_tensor_numel(scalar), 1);
  wgnn_tensor_destroy(scalar);

  wgnn_tensor* bad = nullptr;
  EXPECT_EQ(wgnn_tensor_create(WGNN_DTYPE_FLOAT32, shape, 2, data, 5, &bad), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgnn_last_error()).find("size is 5 bytes"), std::string::npos) << wgnn_last_error();
  EXPECT_EQ(bad, nullptr);
  const int64_t negative[1] = {-1};
  EXPECT_EQ(wgnn_tensor_create(WGNN_DTYPE_FLOAT32, negative, 1, nullptr, 0, &bad), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wgnn_tensor_create(static_cast<wgnn_dtype>(99), shape, 2, nullptr, 0, &bad),
            WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wgnn_tensor_create(WGNN_DTYPE_FLOAT32, nullptr, 2, nullptr, 0, &bad), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wgnn_tensor_create(WGNN_DTYPE_FLOAT32, shape, 2, nullptr, 0, nullptr), WGNN_ERROR_INVALID_ARGUMENT);
  const int64_t huge[2] = {int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_EQ(wgnn_tensor_create(WGNN_DTYPE_FLOAT32, huge, 2, nullptr, 0, &bad), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_STRNE(wgnn_last_error(), "");
  EXPECT_EQ(bad, nullptr);

  // NULL everywhere: zeros, no crash.
  EXPECT_EQ(wgnn_tensor_rank(nullptr), 0u);
  EXPECT_EQ(wgnn_tensor_data(nullptr), nullptr);
  EXPECT_EQ(wgnn_tensor_numel(nullptr), 0);
  wgnn_tensor_destroy(nullptr);
  wgnn_session_destroy(nullptr);
  wgnn_context_destroy(nullptr);
  EXPECT_EQ(wgnn_session_input_count(nullptr), 0u);
  wgnn_value_info vi;
  EXPECT_EQ(wgnn_session_input(nullptr, 0, &vi), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wgnn_session_run(nullptr, nullptr, nullptr, 0, nullptr), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wgnn_context_adapter_info(nullptr, nullptr), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wgnn_context_create(nullptr, nullptr), WGNN_ERROR_INVALID_ARGUMENT);
  wgnn_session* s = nullptr;
  EXPECT_EQ(wgnn_session_create_from_file(nullptr, "m.onnx", nullptr, &s), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wgnn_session_create_from_bytes(nullptr, nullptr, 0, nullptr, nullptr, &s), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgnn_last_error()).find("ctx is NULL"), std::string::npos) << wgnn_last_error();
}

TEST(CApiAdapters, AnAdapterThatIsNotThereIsAnErrorListingThem) {
  wgnn_context* c = nullptr;
  EXPECT_EQ(wgnn_context_create("no-such-adapter", &c), WGNN_ERROR_MODEL);
  const std::string e = wgnn_last_error();
  EXPECT_NE(e.find("no adapter matches 'no-such-adapter'"), std::string::npos) << e;
  EXPECT_NE(e.find("0: "), std::string::npos) << e;
  EXPECT_EQ(c, nullptr);
  // The list, as JSON; and the adapter it names by index opens.
  char* json = nullptr;
  ASSERT_EQ(wgnn_adapters_json(nullptr, &json), WGNN_OK) << wgnn_last_error();
  ASSERT_NE(json, nullptr);
  EXPECT_NE(std::string(json).find("\"index\": 0"), std::string::npos) << json;
  wgnn_string_free(json);
  EXPECT_EQ(wgnn_adapters_json(nullptr, nullptr), WGNN_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(wgnn_context_create("0", &c), WGNN_OK) << wgnn_last_error();
  wgnn_adapter_info info;
  ASSERT_EQ(wgnn_context_adapter_info(c, &info), WGNN_OK);
  EXPECT_EQ(info.index, 0);
  EXPECT_STRNE(info.uuid, "");
  wgnn_context_destroy(c);
}

TEST_F(CApi, AdapterInfo) {
  wgnn_adapter_info info;
  ASSERT_EQ(wgnn_context_adapter_info(ctx_, &info), WGNN_OK);
  EXPECT_STRNE(info.name, "");
  EXPECT_STRNE(info.backend, "");
  EXPECT_STRNE(info.driver_source, "");
}

TEST_F(CApi, RunsAModelFromBytesAndFromAFile) {
  const std::string bytes = affine_bytes();
  wgnn_session* s = nullptr;
  ASSERT_EQ(wgnn_session_create_from_bytes(ctx_, bytes.data(), bytes.size(), nullptr, nullptr, &s), WGNN_OK)
      << wgnn_last_error();
  ASSERT_EQ(wgnn_session_input_count(s), 1u);
  ASSERT_EQ(wgnn_session_output_count(s), 1u);
  wgnn_value_info in, out;
  ASSERT_EQ(wgnn_session_input(s, 0, &in), WGNN_OK);
  ASSERT_EQ(wgnn_session_output(s, 0, &out), WGNN_OK);
  EXPECT_STREQ(in.name, "x");
  EXPECT_STREQ(out.name, "y");
  EXPECT_EQ(in.dtype, WGNN_DTYPE_FLOAT32);
  ASSERT_EQ(in.rank, 2u);
  EXPECT_EQ(in.shape[0], -1);  // dynamic
  EXPECT_EQ(in.shape[1], 2);
  EXPECT_EQ(wgnn_session_input(s, 1, &in), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgnn_last_error()).find("index 1 is out of range"), std::string::npos);

  const int64_t shape[2] = {3, 2};
  const float x[6] = {0, 1, 2, 3, 4, 5};
  wgnn_tensor* xt = nullptr;
  ASSERT_EQ(wgnn_tensor_create(WGNN_DTYPE_FLOAT32, shape, 2, x, sizeof x, &xt), WGNN_OK);
  const char* names[1] = {"x"};
  wgnn_tensor* y = nullptr;
  ASSERT_EQ(wgnn_session_run(s, names, &xt, 1, &y), WGNN_OK) << wgnn_last_error();
  ASSERT_EQ(wgnn_tensor_numel(y), 6);
  EXPECT_EQ(wgnn_tensor_shape(y)[0], 3);
  const float* yv = static_cast<const float*>(wgnn_tensor_data(y));
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(yv[i], x[i] * 3 + (i % 2 ? 20.0f : 10.0f)) << i;
  wgnn_tensor_destroy(y);

  // A wrong dtype, a missing input, a repeated one, NULL slots: statuses.
  wgnn_tensor* it = nullptr;
  ASSERT_EQ(wgnn_tensor_create(WGNN_DTYPE_INT32, shape, 2, nullptr, 0, &it), WGNN_OK);
  y = nullptr;
  EXPECT_EQ(wgnn_session_run(s, names, &it, 1, &y), WGNN_ERROR_MODEL);
  EXPECT_STRNE(wgnn_last_error(), "");
  EXPECT_EQ(y, nullptr);
  EXPECT_EQ(wgnn_session_run(s, nullptr, nullptr, 0, &y), WGNN_ERROR_MODEL);
  EXPECT_NE(std::string(wgnn_last_error()).find("x"), std::string::npos) << wgnn_last_error();
  wgnn_tensor* two[2] = {xt, xt};
  const char* twice[2] = {"x", "x"};
  EXPECT_EQ(wgnn_session_run(s, twice, two, 2, &y), WGNN_ERROR_MODEL);
  EXPECT_NE(std::string(wgnn_last_error()).find("given twice"), std::string::npos) << wgnn_last_error();
  wgnn_tensor* none[1] = {nullptr};
  EXPECT_EQ(wgnn_session_run(s, names, none, 1, &y), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wgnn_session_run(s, names, &xt, 1, nullptr), WGNN_ERROR_INVALID_ARGUMENT);
  wgnn_tensor_destroy(it);
  wgnn_session_destroy(s);

  // The same model from a file, with options.
  const std::string path = ::testing::TempDir() + "/c_api_affine.onnx";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  wgnn_session_options o = wgnn_session_options_default();
  EXPECT_EQ(o.fusion, 1);
  EXPECT_EQ(o.checked, 1);
  EXPECT_EQ(o.max_plans, 8);
  EXPECT_EQ(o.max_plan_sizes, 64);
  EXPECT_EQ(o.size_classes, 1);
  EXPECT_EQ(o.tiered, 1);
  EXPECT_EQ(o.ir_import, 1);
  EXPECT_EQ(o.outputs, nullptr);
  o.fusion = 0;
  o.ir_import = 0;
  o.max_plans = 1;
  ASSERT_EQ(wgnn_session_create_from_file(ctx_, path.c_str(), &o, &s), WGNN_OK) << wgnn_last_error();
  ASSERT_EQ(wgnn_session_run(s, names, &xt, 1, &y), WGNN_OK) << wgnn_last_error();
  EXPECT_FLOAT_EQ(static_cast<const float*>(wgnn_tensor_data(y))[5], 35.0f);
  wgnn_tensor_destroy(y);
  wgnn_session_destroy(s);
  // Options checked: no plan kept, outputs NULL with a count, an unknown output.
  o = wgnn_session_options_default();
  o.max_plans = 0;
  EXPECT_EQ(wgnn_session_create_from_file(ctx_, path.c_str(), &o, &s), WGNN_ERROR_MODEL);
  EXPECT_NE(std::string(wgnn_last_error()).find("max_plans is 0"), std::string::npos) << wgnn_last_error();
  o = wgnn_session_options_default();
  o.max_plan_sizes = 0;
  EXPECT_EQ(wgnn_session_create_from_file(ctx_, path.c_str(), &o, &s), WGNN_ERROR_MODEL);
  EXPECT_NE(std::string(wgnn_last_error()).find("max_plan_sizes is 0"), std::string::npos) << wgnn_last_error();
  o = wgnn_session_options_default();
  o.output_count = 1;
  EXPECT_EQ(wgnn_session_create_from_file(ctx_, path.c_str(), &o, &s), WGNN_ERROR_MODEL);
  EXPECT_NE(std::string(wgnn_last_error()).find("outputs is NULL"), std::string::npos) << wgnn_last_error();
  const char* unknown[1] = {"z"};
  o.outputs = unknown;
  EXPECT_EQ(wgnn_session_create_from_file(ctx_, path.c_str(), &o, &s), WGNN_ERROR_MODEL);
  EXPECT_NE(std::string(wgnn_last_error()).find("z"), std::string::npos) << wgnn_last_error();
  wgnn_tensor_destroy(xt);
}

TEST_F(CApi, BadModelsAreStatusesWithMessages) {
  wgnn_session* s = nullptr;
  const char junk[] = "this is not an ONNX model";
  EXPECT_EQ(wgnn_session_create_from_bytes(ctx_, junk, sizeof junk, nullptr, nullptr, &s), WGNN_ERROR_MODEL);
  EXPECT_STRNE(wgnn_last_error(), "");
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(wgnn_session_create_from_file(ctx_, "/nonexistent/model.onnx", nullptr, &s), WGNN_ERROR_MODEL);
  EXPECT_NE(std::string(wgnn_last_error()).find("/nonexistent/model.onnx"), std::string::npos) << wgnn_last_error();

  wgnn::test::ModelBuilder b;
  b.input("x", {2});
  b.output("y", {2});
  b.node("NoSuchOp", {"x"}, {"y"});
  std::string bytes;
  ASSERT_TRUE(b.m.SerializeToString(&bytes));
  EXPECT_EQ(wgnn_session_create_from_bytes(ctx_, bytes.data(), bytes.size(), nullptr, nullptr, &s),
            WGNN_ERROR_UNSUPPORTED)
      << wgnn_last_error();
  EXPECT_NE(std::string(wgnn_last_error()).find("NoSuchOp"), std::string::npos) << wgnn_last_error();
  EXPECT_EQ(wgnn_session_create_from_bytes(ctx_, nullptr, 10, nullptr, nullptr, &s), WGNN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wgnn_session_create_from_file(ctx_, nullptr, nullptr, &s), WGNN_ERROR_INVALID_ARGUMENT);
}

}  // namespace

// An ExecuTorch program with a key/value cache in mutable buffers: the state
// carries from run to run, wgnn_session_reset_state starts over.
TEST_F(CApi, StateCarriesOverAndResets) {
  const std::string path = std::string(WGNN_SOURCE_DIR) + "/tests/data/pte/models/kv_decoder.pte";
  wgnn_session* s = nullptr;
  ASSERT_EQ(wgnn_session_create_from_file(ctx_, path.c_str(), nullptr, &s), WGNN_OK) << wgnn_last_error();
  EXPECT_EQ(wgnn_session_input_count(s), 2u);  // the token and its position, not the cache
  const int64_t tshape[2] = {1, 1}, pshape[1] = {1};
  auto logits = [&](int64_t tok, int64_t pos) {
    wgnn_tensor *t = nullptr, *p = nullptr, *y = nullptr;
    EXPECT_EQ(wgnn_tensor_create(WGNN_DTYPE_INT64, tshape, 2, &tok, sizeof tok, &t), WGNN_OK);
    EXPECT_EQ(wgnn_tensor_create(WGNN_DTYPE_INT64, pshape, 1, &pos, sizeof pos, &p), WGNN_OK);
    const char* names[2] = {"input_0", "input_1"};
    wgnn_tensor* in[2] = {t, p};
    EXPECT_EQ(wgnn_session_run(s, names, in, 2, &y), WGNN_OK) << wgnn_last_error();
    const float* v = static_cast<const float*>(wgnn_tensor_data(y));
    std::vector<float> out(v, v + wgnn_tensor_numel(y));
    wgnn_tensor_destroy(t);
    wgnn_tensor_destroy(p);
    wgnn_tensor_destroy(y);
    return out;
  };
  const std::vector<float> a = logits(3, 0), b = logits(5, 1);
  ASSERT_EQ(a.size(), 50u);
  EXPECT_EQ(wgnn_session_reset_state(s), WGNN_OK);
  EXPECT_EQ(logits(3, 0), a);
  // Without the reset, step 1 after step 0 again saw the same cache: equal;
  // after a reset, step 1 alone sees an empty slot 0: not b.
  EXPECT_EQ(wgnn_session_reset_state(s), WGNN_OK);
  EXPECT_NE(logits(5, 1), b);
  EXPECT_EQ(wgnn_session_reset_state(nullptr), WGNN_ERROR_INVALID_ARGUMENT);
  wgnn_session_destroy(s);
}
