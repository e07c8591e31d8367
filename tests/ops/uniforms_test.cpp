// Uniform structs declared once (ops/uniforms.h): each registered struct's
// WGSL layout is its C++ layout, each kernel that writes {{PARAMS}} has one,
// and a struct that WGSL would lay out differently is refused.
#include <gtest/gtest.h>

#include <string>

#include "error_of.h"
#include "gpu/error.h"
#include "gpu/shaders.h"
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
    if (text.find("{{PARAMS}}") == std::string_view::npos) continue;
    EXPECT_NO_THROW(ops::uniform_for(name)) << name;
  }
  EXPECT_NE(ops::LayerNormParams::wgsl().find("  width: f32,\n  eps: f32,\n"), std::string::npos)
      << ops::LayerNormParams::wgsl();
  EXPECT_NE(ops::TriluParams::wgsl().find("diagonal: i32"), std::string::npos);
}

#define WGNN_TEST_SHORT(F) F(uint32_t, a) F(float, b)
WGNN_UNIFORM(ShortParams, WGNN_TEST_SHORT);

TEST(Uniforms, AStructWgslWouldLayOutDifferentlyIsAnError) {
  const std::string e = error_of([] { ShortParams::wgsl(); });
  EXPECT_NE(e.find("ShortParams: 8 bytes in C++, 16 in WGSL"), std::string::npos) << e;
  EXPECT_NE(error_of([] { ops::uniform_for("ops/kernels/no_such.wgsl"); }).find("no uniform struct registered"),
            std::string::npos);
}

}  // namespace
}  // namespace wgnn::test
