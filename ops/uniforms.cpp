#include "ops/uniforms.h"

#include <fmt/format.h>

#include "gpu/error.h"

namespace wgnn::ops {
namespace uniform {

std::string declare(std::string_view cpp_name, size_t cpp_size, const std::vector<Field>& fields) {
  std::string s = "struct Params {\n";
  size_t offset = 0;
  for (const Field& f : fields) {
    // WGSL's uniform layout: 4-byte scalars aligned to 4; vec4 and arrays
    // of vec4 (16 and 32 bytes) aligned to 16.
    const size_t align = f.size == 4 ? 4 : 16;
    offset = (offset + align - 1) / align * align;
    if (f.offset != offset || (f.size != 4 && f.size != 16 && f.size != 32)) {
      throw Error(fmt::format("uniform struct {}: field '{}' is at byte {} in C++ but {} in WGSL", cpp_name, f.name,
                              f.offset, offset));
    }
    s += fmt::format("  {}: {},\n", f.name, f.type);
    offset += f.size;
  }
  const size_t wgsl_size = (offset + 15) / 16 * 16;
  if (cpp_size != offset || offset % 16 != 0) {
    throw Error(fmt::format("uniform struct {}: {} bytes in C++, {} in WGSL; pad it to a multiple of 16", cpp_name,
                            cpp_size, wgsl_size));
  }
  return s + "}";
}

}  // namespace uniform

const std::vector<KernelUniform>& kernel_uniforms() {
  static const std::vector<KernelUniform> list{
      {"ops/kernels/unary.wgsl", &UnaryParams::wgsl},
      {"ops/kernels/softmax.wgsl", &SoftmaxParams::wgsl},
      {"ops/kernels/rotary_half.wgsl", &RotaryParams::wgsl},
      {"ops/kernels/copy_rows.wgsl", &CopyRowsParams::wgsl},
      {"ops/kernels/kv_present.wgsl", &KvPresentParams::wgsl},
      {"ops/kernels/cat.wgsl", &CatParams::wgsl},
      {"ops/kernels/softmax_strided.wgsl", &SoftmaxStridedParams::wgsl},
      {"ops/kernels/argmax.wgsl", &ArgParams::wgsl},
      {"ops/kernels/trilu.wgsl", &TriluParams::wgsl},
      {"ops/kernels/batch_norm_fold.wgsl", &FoldParams::wgsl},
      {"ops/kernels/pad_rows.wgsl", &PadRowsParams::wgsl},
      {"ops/kernels/depthwise_taps.wgsl", &DepthwiseTapsParams::wgsl},
      {"ops/kernels/window.wgsl", &WindowParams::wgsl},
      {"ops/kernels/batch_norm.wgsl", &BatchNormParams::wgsl},
      {"ops/kernels/layer_norm.wgsl", &LayerNormParams::wgsl},
      {"ops/kernels/group_norm.wgsl", &GroupNormParams::wgsl},
      {"ops/kernels/group_norm_split.wgsl", &GroupNormParams::wgsl},
      {"ops/kernels/global_pool.wgsl", &GlobalPoolParams::wgsl},
      {"ops/kernels/sample.wgsl", &SampleParams::wgsl},
      {"ops/kernels/gemv.wgsl", &GemvParams::wgsl},
      {"ops/kernels/dft.wgsl", &DftParams::wgsl},
      {"ops/kernels/nonzero.wgsl", &NonzeroParams::wgsl},
      {"ops/kernels/unique.wgsl", &UniqueParams::wgsl},
      {"ops/kernels/unique_first.wgsl", &UniqueParams::wgsl},
      {"ops/kernels/nms.wgsl", &NmsParams::wgsl},
      {"ops/kernels/nms_write.wgsl", &NmsParams::wgsl},
      {"ops/kernels/transpose.wgsl", &CopyParams::wgsl},
      {"ops/kernels/matmul.wgsl", &MatmulParams::wgsl},
      {"ops/kernels/matmul_splitk.wgsl", &MatmulSplitKParams::wgsl},
      {"ops/kernels/binary.wgsl", &BinaryParams::wgsl},
      {"ops/kernels/conv.wgsl", &ConvParams::wgsl},
      {"ops/kernels/conv_splitk.wgsl", &SplitKParams::wgsl},
      {"ops/kernels/conv_depthwise.wgsl", &DepthwiseParams::wgsl},
      {"ops/kernels/conv_depthwise_cl.wgsl", &DepthwiseParams::wgsl},
      {"ops/kernels/im2col.wgsl", &Im2colParams::wgsl},
      {"ops/kernels/pool.wgsl", &PoolParams::wgsl},
      {"ops/kernels/copy.wgsl", &CopyParams::wgsl},
      {"ops/kernels/index.wgsl", &IndexParams::wgsl},
      {"ops/kernels/reduce.wgsl", &ReduceParams::wgsl},
      {"ops/kernels/gather_nd.wgsl", &GatherNdParams::wgsl},
      {"ops/kernels/scatter.wgsl", &ScatterParams::wgsl},
      {"ops/kernels/cumsum.wgsl", &CumsumParams::wgsl},
      {"ops/kernels/grid_sample.wgsl", &GridSampleParams::wgsl},
      {"ops/kernels/roi_align.wgsl", &RoiAlignParams::wgsl},
      {"ops/kernels/topk_select.wgsl", &TopkParams::wgsl},
      {"ops/kernels/topk_sort.wgsl", &TopkParams::wgsl},
      {"ops/kernels/quantize.wgsl", &QdqParams::wgsl},
      {"ops/kernels/qside.wgsl", &SideParams::wgsl},
      {"ops/kernels/matmul_integer.wgsl", &MatmulIntParams::wgsl},
      {"ops/kernels/matmul_integer_dot4.wgsl", &MatmulIntParams::wgsl},
      {"ops/kernels/conv_integer.wgsl", &ConvIntParams::wgsl},
      {"ops/kernels/conv_integer_tiled.wgsl", &ConvIntTiledParams::wgsl},
      {"ops/kernels/attention.wgsl", &AttentionParams::wgsl},
      {"ops/kernels/resize.wgsl", &ResizeParams::wgsl},
      {"ops/kernels/recurrent.wgsl", &RecurrentParams::wgsl},
      {"ops/kernels/matmul_qweight.wgsl", &MatmulQWeightParams::wgsl},
      {"ops/kernels/gemv_nbits.wgsl", &MatmulQWeightParams::wgsl},
  };
  return list;
}

const std::string& uniform_for(std::string_view kernel) {
  for (const KernelUniform& k : kernel_uniforms()) {
    if (kernel == k.kernel) return k.wgsl();
  }
  throw Error(fmt::format("kernel '{}' has {{{{PARAMS}}}} but no uniform struct registered (ops/uniforms.h)", kernel));
}

}  // namespace wgnn::ops
