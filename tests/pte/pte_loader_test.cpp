// The .pte front end without a GPU (pte::load_from_bytes): the committed
// fixtures (tests/data/pte/, scripts/models/pte_fixtures.py) load into IR
// with the program's inputs and outputs; what wgnn cannot run is an
// Unsupported error naming all of it at load; a damaged file (truncated, or
// bytes changed) is an Error, never a crash or another exception type.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <string>

#include "gpu/error.h"
#include "onnx/session.h"
#include "pte/program.h"

using namespace wgnn;
using testing::HasSubstr;

namespace {

const std::string kData = std::string(WGNN_SOURCE_DIR) + "/tests/data/pte";

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string load_error(const std::string& bytes) {
  try {
    pte::load_from_bytes(bytes, "m.pte");
  } catch (const Unsupported& e) {
    return std::string("Unsupported: ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(PteLoader, SeedModelsLoadWithTheirInputsAndOutputs) {
  const pte::Model m = pte::load(kData + "/models/modnet.pte");
  EXPECT_EQ(m.method, "forward");
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "input_0");
  EXPECT_EQ(m.inputs[0].dtype, DType::F32);
  EXPECT_EQ(m.inputs[0].shape, (Shape{1, 3, 256, 256}));
  EXPECT_EQ(m.outputs.size(), 3u);
  EXPECT_GT(m.delegate_calls, 1);
  EXPECT_GT(m.kernel_calls, 0);  // instance norm runs as a portable kernel in ExecuTorch
  EXPECT_GT(m.ir.live_nodes(), 50u);
}

TEST(PteLoader, PortableKernelsOnly) {
  const pte::Model m = pte::load(kData + "/errors/portable_only.pte");
  EXPECT_EQ(m.delegate_calls, 0);
  EXPECT_GT(m.kernel_calls, 0);
  EXPECT_EQ(m.outputs.at(0).shape, (Shape{2, 4}));
}

TEST(PteLoader, AnotherBackendsDelegateIsUnsupported) {
  const std::string e = load_error(read(kData + "/errors/xnnpack.pte"));
  EXPECT_THAT(e, HasSubstr("Unsupported"));
  EXPECT_THAT(e, HasSubstr("XnnpackBackend"));
}

TEST(PteLoader, EveryUnmappedOpIsListedAtOnce) {
  const std::string e = load_error(read(kData + "/errors/unmapped_ops.pte"));
  EXPECT_THAT(e, HasSubstr("Unsupported"));
  EXPECT_THAT(e, HasSubstr("2 ops without a mapping"));
  EXPECT_THAT(e, HasSubstr("atan2"));
  EXPECT_THAT(e, HasSubstr("trunc"));
}

TEST(PteLoader, DynamicShapesLoadAtTheirBounds) {
  const std::string bytes = read(kData + "/errors/dynamic_batch.pte");
  const pte::Model m = pte::load_from_bytes(bytes, "m.pte");
  EXPECT_TRUE(m.dynamic);
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].shape, (Shape{16, 8}));
  EXPECT_EQ(m.inputs[0].max_shape, (Shape{16, 8}));
  EXPECT_EQ(m.outputs.at(0).max_shape, (Shape{16, 4}));
  // The Session's loader keeps the file to read it at other sizes.
  const onnx_import::LoadedModel lm = onnx_import::load_model_from_bytes(bytes, "m.pte", "/nonexistent");
  EXPECT_TRUE(bool(lm.ir_at));
  EXPECT_EQ(lm.inputs.at(0).max_shape, (Shape{16, 8}));
  // A static program has no bound.
  const pte::Model st = pte::load(kData + "/errors/portable_only.pte");
  EXPECT_FALSE(st.dynamic);
  EXPECT_TRUE(st.inputs.at(0).max_shape.empty());
}

TEST(PteLoader, MutableBuffersAreStateNotInputs) {
  // The KV decoder: keys and values in buffers it writes with index_copy_
  // (aten::copy_ back into them at the method's end).
  const pte::Model m = pte::load(kData + "/models/kv_decoder.pte");
  EXPECT_EQ(m.inputs.size(), 2u);
  EXPECT_EQ(m.outputs.size(), 1u);
  ASSERT_EQ(m.states.size(), 2u);
  for (const auto& st : m.states) {
    EXPECT_EQ(st.initial.shape, (Shape{1, 2, 16, 16}));
    EXPECT_EQ(st.output, st.input + ".next");
  }
  EXPECT_EQ(m.ir.inputs().size(), 4u);
  EXPECT_EQ(m.ir.outputs().size(), 3u);
}

TEST(PteLoader, ExecuTorchsLlmExportKeepsItsCacheAsState) {
  // export_llama -kv --use_sdpa_with_kv_cache -V: the whole model in one
  // delegate, each layer's key and value caches constants that
  // sdpa_with_kv_cache writes, the tokens of a dynamic length.
  const pte::Model m = pte::load(kData + "/models/et_llama.pte");
  EXPECT_EQ(m.delegate_calls, 1);
  ASSERT_EQ(m.inputs.size(), 2u);
  EXPECT_EQ(m.inputs[0].max_shape, (Shape{1, 31}));
  EXPECT_TRUE(m.dynamic);
  EXPECT_EQ(m.states.size(), 4u);  // 2 layers x (keys, values)
  for (const auto& st : m.states) EXPECT_EQ(st.initial.shape, (Shape{1, 32, 2, 16}));
}

TEST(PteLoader, AMethodThatIsNotThereIsNamed) {
  try {
    pte::load(kData + "/errors/portable_only.pte", "decode");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no method 'decode'"));
    EXPECT_THAT(e.what(), HasSubstr("forward"));
  }
}

TEST(PteLoader, TheSessionTellsAPteByItsIdentifier) {
  // Session's loader (no GPU) reads a .pte whatever its name.
  const std::string bytes = read(kData + "/errors/portable_only.pte");
  const onnx_import::LoadedModel m = onnx_import::load_model_from_bytes(bytes, "model.bin", "/nonexistent");
  EXPECT_EQ(m.format, "pte");
  ASSERT_NE(m.ir, nullptr);
  EXPECT_EQ(m.inputs.at(0).name, "input_0");
  EXPECT_EQ(m.outputs.at(0).shape, (Shape{2, 4}));
}

TEST(PteLoader, TruncatedFilesAreErrors) {
  for (const char* f : {"/errors/portable_only.pte", "/models/whisper_standin.pte"}) {
    const std::string bytes = read(kData + f);
    for (size_t n : {size_t(0), size_t(4), size_t(8), size_t(16), size_t(40), bytes.size() / 3, bytes.size() / 2,
                     bytes.size() - 100, bytes.size() - 1}) {
      const std::string e = load_error(bytes.substr(0, n));
      EXPECT_NE(e, "no error") << f << " cut at " << n;
    }
  }
}

// Changed bytes: loaded or an Error, nothing else (run under ASan by
// scripts/sanitize --host).
TEST(PteLoader, ChangedBytesAreLoadedOrErrors) {
  const std::string bytes = read(kData + "/models/transformer_block.pte");
  std::mt19937 rng(7);
  int errors = 0, loaded = 0;
  for (int i = 0; i < 400; ++i) {
    std::string b = bytes;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the flatbuffer and headers (the first 64 KiB), where a
      // change moves offsets; the weights after them load either way.
      const size_t at = rng() % std::min<size_t>(b.size(), 65536);
      b[at] = char(rng() & 0xff);
    }
    try {
      pte::load_from_bytes(b, "m.pte");
      ++loaded;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_EQ(errors + loaded, 400);
  // A small program, changed anywhere (its flatbuffer is all of it).
  const std::string small = read(kData + "/errors/portable_only.pte");
  for (int i = 0; i < 3000; ++i) {
    std::string b = small;
    const int flips = 1 + int(rng() % 3);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = char(rng() & 0xff);
    try {
      pte::load_from_bytes(b, "m.pte");
    } catch (const Error&) {
    }
  }
}

}  // namespace
