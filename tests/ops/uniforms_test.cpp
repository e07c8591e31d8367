// Uniform structs declared once (ops/uniforms.h): each registered struct's
// WGSL layout is its C++ layout, each kernel that writes {{PARAMS}} has one,
// and a struct that WGSL would lay out differently is refused.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "error_of.h"
#include "gpu/error.h"
#include "gpu/shaders.h"
#include "ops/subgroup_matmul.h"
#include "ops/uniforms.h"

namespace wgnn::test {
namespace {

TEST(Uniforms, EveryRegisteredStructMatchesItsKernel) {
  size_t n = 0;
  for (const ops::KernelUniform& k : ops::kernel_uniforms()) {
    SCOPED_TRACE(k.kernel);
    std::string text;
    ASSERT_NO_THROW(text = k.wgsl());
    EXPECT_EQ(text.rfind("struct Params {\n", 0), 0u) << text;
    const std::string_view src = gpu::shader_source(k.kernel);
    EXPECT_NE(src.find("{{PARAMS}}"), std::string_view::npos) << "registered but its kernel declares its own struct";
    ++n;
  }
  EXPECT_GE(n, 10u);
  for (const auto& [name, text] : gpu::embedded_shaders()) {
    // A kernel with a uniform reads the struct declared once, never its own.
    // A library file (ops/kernels/lib/) may bind it for the kernels that
    // paste it in, which write {{PARAMS}} (lib/group_norm_io.wgsl).
    const bool library = std::string_view(name).find("/lib/") != std::string_view::npos;
    if (text.find("var<uniform>") != std::string_view::npos) {
      if (!library) {
        EXPECT_NE(text.find("{{PARAMS}}"), std::string_view::npos) << name << " declares its uniform struct by hand";
      }
      EXPECT_EQ(text.find("struct Params"), std::string_view::npos) << name;
    }
    if (library) {
      EXPECT_EQ(text.find("{{PARAMS}}"), std::string_view::npos) << name << ": only kernels declare the struct";
      continue;
    }
    if (text.find("{{PARAMS}}") == std::string_view::npos) continue;
    EXPECT_NO_THROW(ops::uniform_for(name)) << name;
  }
  EXPECT_NE(ops::MatmulParams::wgsl().find("  shape: array<vec4<u32>, 2>,\n"), std::string::npos)
      << ops::MatmulParams::wgsl();
  EXPECT_NE(ops::ConvParams::wgsl().find("  stride: vec4<i32>,\n"), std::string::npos);
  EXPECT_NE(ops::RecurrentParams::wgsl().find("  alpha: array<vec4<f32>, 2>,\n"), std::string::npos);
  // The tensor-core GEMM's generated WGSL pastes these (no kernel file).
  EXPECT_NO_THROW(ops::SubgroupMatmulParams::wgsl());
  EXPECT_NE(ops::SubgroupConvParams::wgsl().find("  pad2: u32,\n  in_h: u32,\n"), std::string::npos)
      << ops::SubgroupConvParams::wgsl();
  EXPECT_NE(ops::LayerNormParams::wgsl().find("  width: f32,\n  eps: f32,\n"), std::string::npos)
      << ops::LayerNormParams::wgsl();
  EXPECT_NE(ops::TriluParams::wgsl().find("diagonal: i32"), std::string::npos);
}

#define WGNN_TEST_SHORT(F) F(uint32_t, a) F(float, b)
WGNN_UNIFORM(ShortParams, WGNN_TEST_SHORT);
// A vec4 after one scalar: C++ aligns it to 16 as WGSL does, so both put
// it at byte 16 (and the struct is 32 bytes in both).
#define WGNN_TEST_VEC(F) F(uint32_t, a) F(ops::U32x4, v)
WGNN_UNIFORM(VecParams, WGNN_TEST_VEC);

TEST(Uniforms, VectorFieldsLieWhereWgslPutsThem) {
  static_assert(offsetof(VecParams, v) == 16 && sizeof(VecParams) == 32);
  EXPECT_EQ(VecParams::wgsl(), "struct Params {\n  a: u32,\n  v: vec4<u32>,\n}");
}

TEST(Uniforms, AStructWgslWouldLayOutDifferentlyIsAnError) {
  const std::string e = error_of([] { ShortParams::wgsl(); });
  EXPECT_NE(e.find("ShortParams: 8 bytes in C++, 16 in WGSL"), std::string::npos) << e;
  EXPECT_NE(error_of([] { ops::uniform_for("ops/kernels/no_such.wgsl"); }).find("no uniform struct registered"),
            std::string::npos);
}

}  // namespace
}  // namespace wgnn::test
