// Every kernel template of ops/kernels compiles in each storage variant
// (f32 and f16, vec4 and scalar; matmul and attention in several tiles).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <vector>

#include "gpu/shaders.h"
#include "op_test_util.h"
#include "ops/helpers.h"
#include "ops/subgroup_matmul.h"

using namespace wgnn;
using wgnn::test::ctx;

TEST(Kernels, EveryTemplateCompilesInEveryVariant) {
  Graph g(ctx());
  int compiled = 0;
  // Each pipeline as it is asked for (its creation may still be running on
  // Dawn's workers), resolved at the end: the driver's compile checked too,
  // and none still compiling when the process exits (the context lives for
  // the process; on an H200 the exit crashed with creations in flight).
  std::vector<std::pair<std::string, const gpu::Pipeline*>> made;
  const auto ask = [&](std::string_view name, const ops::Subs& subs, const std::string& entry) {
    made.emplace_back(std::string(name), &ops::kernel(g, name, subs, {}, entry));
  };
  for (const auto& [name, text] : gpu::embedded_shaders()) {
    if (text.find("{{") == std::string_view::npos) continue;
    // A library file (ops/kernels/lib/) is compiled inside the kernels that include it.
    if (std::string_view(name).find("/lib/") != std::string_view::npos) continue;
    for (DType dt : {DType::F32, DType::F16}) {
      if (dt == DType::F16 && !ctx().features().shader_f16) continue;
      for (bool vec4 : {true, false}) {
        SCOPED_TRACE(std::string(name) + " " + dtype_name(dt) + (vec4 ? " vec4" : " scalar"));
        // vector_subs where the kernel's own text names one of its
        // placeholders, else float_subs as such kernels get: a library file
        // it includes may then hold none of them (a placeholder in a
        // library's comment once broke gemv.wgsl and the depthwise
        // convolution, which this compiled with vector_subs only).
        ops::Subs subs = ops::vector_subs(g, dt, vec4, "test");
        const bool vector_kernel = std::any_of(subs.begin(), subs.end(), [&](const auto& kv) {
          return kv.first != "T" && kv.first != "ENABLE" && text.find("{{" + kv.first + "}}") != std::string_view::npos;
        });
        if (!vector_kernel) {
          if (!vec4) continue;  // one variant: the vector width plays no part
          subs = ops::float_subs(g, dt, "test");
        }
        subs.emplace_back("EXPR", "x");
        // Kernels with a compute or accumulator type and an output storage
        // type: {{C}} (binary.wgsl), {{A}} (reduce.wgsl), {{O}}.
        subs.emplace_back("C", "f32");
        subs.emplace_back("A", "f32");
        subs.emplace_back("O", dt == DType::F16 ? "f16" : "f32");
        // softmax.wgsl: the output's vector and a chunk's largest element.
        subs.emplace_back("OV", vec4 ? (dt == DType::F16 ? "vec4<f16>" : "vec4<f32>") : (dt == DType::F16 ? "f16" : "f32"));
        subs.emplace_back("HMAX", vec4 ? "max_nan(max_nan(v.x, v.y), max_nan(v.z, v.w))" : "v");
        // cumsum.wgsl: the scan's operation and its identity (+ and 0 for
        // sums, * and 1 for products).
        subs.emplace_back("OP", "*");
        subs.emplace_back("INIT", "1");
        // conv_depthwise_cl.wgsl's vectors: 4 (vec4) and 1 (scalar) here,
        // 2 in the convolution tests.
        if (text.find("{{WIDEN}}") != std::string_view::npos) {
          ops::Subs d = ops::depthwise_vector_subs(dt, vec4 ? 4 : 1);
          subs.erase(std::remove_if(subs.begin(), subs.end(), [](const auto& kv) { return kv.first == "VW"; }),
                     subs.end());
          subs.insert(subs.begin(), d.begin(), d.end());
        }
        std::string entry = text.find("fn main(") != std::string_view::npos ? "main" : "";
        // matmul.wgsl's tiles, per-thread blocks, K steps and stages (as
        // ops/matmul.cpp's configurations allow).
        const std::vector<std::array<const char*, 6>> tiles =
            text.find("{{TM}}") != std::string_view::npos
                ? std::vector<std::array<const char*, 6>>{{"32", "32", "4", "4", "16", "1"},
                                                          {"32", "64", "4", "4", "16", "1"},
                                                          {"64", "64", "4", "4", "16", "1"},
                                                          {"64", "64", "8", "4", "16", "1"},
                                                          {"64", "64", "4", "4", "32", "2"},
                                                          {"64", "128", "4", "8", "16", "2"},
                                                          {"128", "128", "8", "8", "8", "2"}}
                : std::vector<std::array<const char*, 6>>{{"", "", "", "", "", ""}};
        // attention.wgsl's head dims and tiles (D, DV, BQ, KS, BK, TILE, CW as
        // ops/attention.cpp derives them): one thread per query, key splits,
        // head dims not multiples of 4, 128.
        if (text.find("{{BQ}}") != std::string_view::npos) {
          subs.emplace_back("M", dt == DType::F16 ? "f16" : "f32");
          for (const auto& t : std::vector<std::array<const char*, 7>>{{"64", "64", "32", "4", "32", "1088", "8"},
                                                                       {"3", "5", "64", "1", "8", "64", "1"},
                                                                       {"80", "40", "4", "32", "32", "1024", "5"},
                                                                       {"128", "128", "8", "16", "16", "1056", "8"}}) {
            SCOPED_TRACE(fmt::format("D={} DV={} BQ={} KS={} BK={}", t[0], t[1], t[2], t[3], t[4]));
            ops::Subs s2 = subs;
            const char* names[] = {"D", "DV", "BQ", "KS", "BK", "TILE", "CW"};
            for (size_t i = 0; i < 7; ++i) s2.emplace_back(names[i], t[i]);
            EXPECT_NO_THROW(ask(name, s2, entry));
            ++compiled;
          }
          continue;
        }
        // layer_norm.wgsl, plain and with the residual add (as ops/norm.cpp
        // fills it, before the type placeholders its text holds).
        if (text.find("{{ADD_DECL}}") != std::string_view::npos) {
          for (int add : {0, 1, 2}) {  // plain, the residual add, a split product's parts and bias added too
            ops::Subs s2 = subs;
            if (add == 2) {
              s2.insert(s2.begin(), {{"ADD_DECL",
                                      "@group(0) @binding(7) var<storage, read> part: array<vec4<f32>>;\n"
                                      "@group(0) @binding(8) var<storage, read_write> sum_out: array<{{V}}>;\n"
                                      "@group(0) @binding(9) var<storage, read> mm_bias: array<{{V}}>;"},
                                     {"LOAD_X", "var acc = vec4<f32>(0.0);\n"
                                                "  for (var s = 0u; s < params.parts; s++) {\n"
                                                "    acc += part[s * params.part_stride + i];\n  }\n"
                                                "  let y = {{V}}(acc + {{F32V}}(mm_bias[i % params.width_v]));\n"
                                                "  let s = {{V}}({{F32V}}(x[i]) + {{F32V}}(y));\n"
                                                "  sum_out[i] = s;\n  return s;"}});
              if (!vec4) continue;  // vec4 rows only
            } else if (add) {
              s2.insert(s2.begin(), {{"ADD_DECL",
                                      "@group(0) @binding(7) var<storage, read> x2: array<{{V}}>;\n"
                                      "@group(0) @binding(8) var<storage, read_write> sum_out: array<{{V}}>;"},
                                     {"LOAD_X", "let s = {{V}}({{F32V}}(x[i]) + {{F32V}}(x2[i]));\n"
                                                "  sum_out[i] = s;\n  return s;"}});
            } else {
              s2.insert(s2.begin(), {{"ADD_DECL", ""}, {"LOAD_X", "return x[i];"}});
            }
            EXPECT_NO_THROW(ask(name, s2, entry));
            ++compiled;
          }
          continue;
        }
        // The convolutions, without and with the per-channel affine and
        // the residual (as ops/conv.cpp's add_epilogue_subs fills them: the
        // bindings after the kernel's last, the epilogue's value, channel
        // and output index).
        if (text.find("{{AFFINE}}") != std::string_view::npos) {
          const std::string n(name);
          const int binding = n.find("splitk") != std::string::npos ? 4 : n.find("depthwise") != std::string::npos ? 5 : 6;
          const std::string v = n == "ops/kernels/conv.wgsl" ? "acc[i][j] + b" : "acc";
          const std::string c = n.find("depthwise") != std::string::npos ? "co" : "c";
          const std::string oi = n == "ops/kernels/conv.wgsl" ? "oi" : "i";
          const bool f16 = dt == DType::F16;
          for (int affine : {0, 1, 2}) {  // none, on the f32 value, rounded to float16 first
            for (bool residual : {false, true}) {
              SCOPED_TRACE(fmt::format("affine {} residual {}", affine, residual));
              ops::Subs s2 = subs;
              std::string decl =
                  affine ? fmt::format("\n@group(0) @binding({}) var<storage, read> affine: array<f32>;", binding) : "";
              std::string val = v;
              if (affine) {
                val = fmt::format("{0} * affine[{1}] + affine[params.cout + {1}]",
                                  affine == 2 ? "round_f16(" + v + ")" : "(" + v + ")", c);
              }
              if (residual) {
                decl += fmt::format("\n@group(0) @binding({}) var<storage, read> residual: array<{}>;",
                                    binding + (affine ? 1 : 0), f16 ? "f16" : "f32");
                val = fmt::format("{} + f32(residual[{}])", f16 ? "round_f16(" + val + ")" : "(" + val + ")", oi);
              }
              if (affine == 2 || (residual && f16)) decl += "\n" + ops::round_f16_wgsl();
              s2.emplace_back("AFFINE_BINDING", decl);
              s2.emplace_back("AFFINE", val);
              EXPECT_NO_THROW(ask(name, s2, entry));
              ++compiled;
            }
          }
          continue;
        }
        // The quantized kernels (ops/quantized.cpp), {{T}} standing for the
        // float side: the integer products with an int32 result and
        // requantized (the parameters in one u32 buffer), unpacked and
        // packed (dot4I8Packed, uint8 and int8 operands); quantize.wgsl both
        // ways; qside.wgsl with scales of type {{T}}.
        const std::string T = dt == DType::F16 ? "f16" : "f32";
        if (text.find("{{REQUANT_BINDINGS}}") != std::string_view::npos) {
          // The packed dot-product form needs the WGSL language feature.
          const bool dot4 = text.find("{{A_SHIFT}}") != std::string_view::npos;
          if (dot4 && !ctx().features().packed_4x8_dot) continue;
          for (bool rq : {false, true}) {
            ops::Subs s2 = subs;
            if (dot4) s2.insert(s2.end(), {{"A_SHIFT", rq ? "128" : "0"}, {"B_SHIFT", rq ? "0" : "128"}});
            s2.emplace_back("REQUANT_BINDINGS", rq ? "@group(0) @binding(6) var<storage, read> side: array<u32>;" : "");
            s2.emplace_back("EPILOGUE", rq ? "dst[o] = i32(round(f32(acc) * bitcast<f32>(side[params.off_y])));" : "dst[o] = acc;");
            // The tiled convolution's k table, after the side buffer.
            if (text.find("{{KTAB_BINDING}}") != std::string_view::npos) {
              s2.emplace_back("KTAB_BINDING", fmt::format("@group(0) @binding({}) var<storage, read> ktab: "
                                                          "array<vec4<i32>>;", rq ? 7 : 6));
            }
            EXPECT_NO_THROW(ask(name, s2, entry));
            ++compiled;
          }
          continue;
        }
        if (text.find("{{BODY}}") != std::string_view::npos) {
          for (bool quantize : {true, false}) {
            ops::Subs s2 = subs;
            s2.insert(s2.end(), {{"SRC", quantize ? T : "i32"}, {"DST", quantize ? "i32" : T}, {"S", T},
                                 {"BODY", quantize ? "  dst[i] = i32(round(f32(src[i]) / f32(scale[s])) + f32(z));"
                                                   : "  dst[i] = " + T + "(f32(src[i] - z) * f32(scale[s]));"}});
            EXPECT_NO_THROW(ask(name, s2, entry));
            ++compiled;
          }
          continue;
        }
        // matmul_qweight.wgsl: a weight function over its bindings (ops/
        // quantized.cpp's own two compile in tests/ops/quantized_test).
        if (text.find("{{WEIGHT}}") != std::string_view::npos) {
          ops::Subs s2 = subs;
          s2.insert(s2.end(), {{"S", T},
                               {"WEIGHT", "fn weight(k: u32, n: u32) -> f32 {\n  return f32(b[k] + zp[n] + params.q0) * "
                                          "f32(scales[n]);\n}"}});
          EXPECT_NO_THROW(ask(name, s2, entry));
          ++compiled;
          continue;
        }
        // gemv_nbits.wgsl: the scales' type.
        if (text.find("{{S}}") != std::string_view::npos) {
          ops::Subs s2 = subs;
          s2.emplace_back("S", T);
          EXPECT_NO_THROW(ask(name, s2, entry));
          ++compiled;
          continue;
        }
        if (text.find("{{SA}}") != std::string_view::npos) {
          ops::Subs s2 = subs;
          s2.insert(s2.end(), {{"SA", T}, {"SB", T}, {"SY", T}});
          EXPECT_NO_THROW(ask(name, s2, entry));
          ++compiled;
          continue;
        }
        // recurrent.wgsl: two entry points.
        if (text.find("fn persistent(") != std::string_view::npos) {
          for (const char* e : {"persistent", "step"}) {
            EXPECT_NO_THROW(ask(name, subs, e));
            ++compiled;
          }
          continue;
        }
        // Kernels with a run-time check (binary.wgsl, index.wgsl,
        // roi_align.wgsl), both variants.
        if (text.find("{{CHECK_DECL}}") != std::string_view::npos) {
          const std::string_view n(name);
          const uint32_t binding =
              n.find("binary") != std::string_view::npos || n.find("roi_align") != std::string_view::npos ? 5 : 4;
          for (bool checked : {false, true}) {
            ops::Subs s2 = subs;
            for (auto& s : ops::check_subs(checked, binding)) s2.push_back(s);
            EXPECT_NO_THROW(ask(name, s2, entry));
            ++compiled;
          }
          continue;
        }
        for (const auto& t : tiles) {
          ops::Subs s2 = subs;
          if (*t[0]) {
            SCOPED_TRACE(fmt::format("tile {}x{}, {}x{} per thread, k {}, {} stages", t[0], t[1], t[2], t[3], t[4],
                                     t[5]));
            s2.emplace_back("TM", t[0]);
            s2.emplace_back("TN", t[1]);
            s2.emplace_back("RM", t[2]);
            s2.emplace_back("RN", t[3]);
            s2.emplace_back("TK", t[4]);
            s2.emplace_back("STAGES", t[5]);
          }
          EXPECT_NO_THROW(ask(name, s2, entry));
          ++compiled;
        }
      }
    }
  }
  EXPECT_GT(compiled, 0);
  for (const auto& [name, p] : made) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(p->handle());
  }
}
