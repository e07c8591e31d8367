#pragma once
// Matrix products on subgroup matrices (tensor cores): WGSL's
// chromium_experimental_subgroup_matrix, offered by a Dawn built from source
// on Vulkan drivers with VK_KHR_cooperative_matrix (docs/DAWN.md).
//
// C[b] = alpha * A[b] (M x K) @ B[b] (K x N) + beta * bias, A and B float16
// row-major, accumulated in f32 on 16x16x16 matrices, C float32 or float16.
// A workgroup computes a BM x BN block of C with SG_M x SG_N subgroups, each
// holding (BM / SG_M / 16) x (BN / SG_N / 16) result matrices; A and B tiles
// of depth BK are staged through workgroup memory (double-buffered when
// `stages` is 2, the next tile's global loads issued before the current
// tile's multiplies). Operands are read as vec4<u32> (8 halves), so K and N
// must be multiples of 8; M, N and K need not be multiples of the tile.
//
// Convolution mode (`conv`): B is not in memory but the implicit im2col
// matrix of an NCHW float16 input X [Ci, H, W] per batch entry (binding 1
// read as array<f16>): B[k][p] = X[ci][oy*sh - ph + ky*dh][ox*sw - pw + kx*dw]
// with k = (ci*KH + ky)*KW + kx and p = oy*OW + ox, zero outside the image,
// so that A = the weight [Co, Ci*KH*KW] gives C [Co, OH*OW] per image. The B
// tile is gathered with scalar loads, each thread keeping the output pixels
// of its tile columns (decoded once) and stepping its reduction rows through
// (ci, ky, kx) by a fixed increment (no division in the loop).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "graph/graph.h"
#include "ops/epilogue.h"
#include "ops/uniforms.h"

namespace wgnn::ops {

struct SubgroupMatmulConfig {
  uint32_t bm = 128, bn = 128, bk = 32;
  uint32_t sg_m = 2, sg_n = 2;  // subgroups per workgroup along M and N
  uint32_t stages = 2;          // 1: one tile buffer; 2: double-buffered
  // Tiles in flight in registers (suffix /d2): 1, the next tile's global
  // loads issued before this tile's multiplies; 2, the
  // loads two tiles ahead, in two register sets (with two stages, the
  // buffers alternate with the register sets).
  uint32_t prefetch = 1;
  bool out_f16 = false;         // C is float16 (else float32)
  bool bias = false;            // a bias operand (binding 4), read with strides
  bool bias_f16 = false;
  // A float32 affine per row of C (the binding after the bias's, [2, M]:
  // scale, then shift),
  // applied after the bias and before the activation (a convolution's
  // inference batch norm in float16).
  bool affine = false;
  bool affine_rounded = false;  // the value rounded to f16 before the affine
  bool a_trans = false;  // A stored K x M (needs M % 8 == 0)
  bool b_trans = false;  // B stored N x K (needs K % 8 == 0; N % 8 == 0 still, for the epilogue)
  Activation act = Activation::None;  // the epilogue's activation (ops/epilogue.h), clamp to [P.lo, P.hi]
  // Benchmark variant for M, N multiples of the tile: no edge epilogue (no
  // scratch workgroup memory).
  bool full_tiles = false;
  // Benchmark-only ablations (wrong results, for finding the bottleneck):
  // 1 skips the global loads of the next tile, 2 its stores to workgroup
  // memory, 4 the per-step operand loads from workgroup memory, 8 loads
  // every tile from the first tile's addresses (L1 hits), 16 every
  // workgroup from the first workgroup's rows and columns (L2 hits), 32
  // drops the barrier between the multiplies and the stores (one stage),
  // 64 stores two of each chunk's four words (half the stores).
  uint32_t ablate = 0;
  bool no_rotation = false;  // benchmark: store words unrotated (bank conflicts)
  // Benchmark: every global load checked against M, N and K (suffix /c;
  // the kernel otherwise checks K on the last tile only, docs/BENCHMARKS.md).
  bool checked_loads = false;
  // Benchmark: A and B loaded as words, four a 16-byte chunk in the order
  // the rotated workgroup stores take them (suffix /w), not as one vec4
  // rotated by selects.
  bool word_loads = false;
  // Benchmark: workgroup tiles of vec4<u32>, each chunk stored whole (suffix
  // /v). Needs a Dawn whose Tint takes f16 subgroup-matrix loads from such
  // arrays (stock WGSL takes array<f16> only; docs/BENCHMARKS.md); the
  // emulated kernel runs it anywhere.
  bool vec4_tiles = false;
  // Benchmark: that much unused workgroup memory (suffix /pN), for finding
  // how much workgroup memory a multiprocessor gives the kernel.
  uint32_t pad_kb = 0;
  // B is the implicit im2col matrix of a convolution's input (above); the
  // uniform is SubgroupConvParams. Needs the threads to cover whole rows of
  // the B tile (threads % BN == 0 and BK a multiple of threads / BN) or
  // BN a multiple of the threads.
  bool conv = false;
  // Split-K (also in the convolution mode, one image): workgroup z =
  // batch entry * P.splits + range; range s sums K
  // in [s * P.kchunk, min(K, (s + 1) * P.kchunk)) (kchunk a multiple of BK)
  // and writes its float32 sums, alpha 1 and nothing else of the epilogue,
  // at C[s * P.kcount + b * c_batch + m * N + n] (kcount = batch * M * N);
  // a second pass adds the ranges and applies the epilogue. For products
  // whose tiles are too few to fill the GPU.
  bool splitk = false;
  // A float16 residual of C's shape (the binding after the bias's and the
  // affine's) added after the activation, as wgnn.matmul_add does; with
  // residual_first, to the value rounded to float16 before the activation,
  // as wgnn.convolution_padded does (the values of a separate add).
  bool residual = false;
  bool residual_first = false;
  // Float16 results written one half at a time, each checked against N
  // (C bound as array<f16>): the convolution mode where OH*OW is not a
  // multiple of 8 (ResNet's 14x14 and 7x7 stages), whose rows of C do not
  // start on a 16-byte boundary.
  bool odd_n = false;
  // Subgroup matrices emulated by scalar code reading the workgroup tiles
  // (every lane computes its 8 elements of a 16x16 result): the same kernel,
  // staging and epilogue on a device without subgroup matrices, for tests.
  bool emulate = false;

  uint32_t subgroups() const { return sg_m * sg_n; }
  uint32_t threads() const { return subgroups() * 32; }
  uint32_t workgroup_bytes() const;
  std::string name() const;
};

// Uniform parameters of the kernel (binding 3), declared once
// (ops/uniforms.h): the generated WGSL pastes SubgroupMatmulParams::wgsl()
// or SubgroupConvParams::wgsl(). a_batch .. bias_batch: element strides per
// batch (0: shared); lo, hi: the clamp activation's bounds; pad0 is 0 and
// pad1 is not 0x7fffffff (the kernel's loop bounds and a store the compiler
// must keep read them); splits, kchunk and kcount: the split-K mode's
// (SubgroupMatmulConfig::splitk).
#define WGNN_SUBGROUP_GEMM_FIELDS(F)                                                                         \
  F(uint32_t, M) F(uint32_t, N) F(uint32_t, K) F(uint32_t, tiles_n) F(uint32_t, a_batch) F(uint32_t, b_batch) \
      F(uint32_t, c_batch) F(uint32_t, bias_batch) F(uint32_t, bias_sm) F(uint32_t, bias_sn) F(uint32_t, pad0) \
          F(uint32_t, pad1) F(float, alpha) F(float, beta) F(float, lo) F(float, hi) F(uint32_t, splits)     \
              F(uint32_t, kchunk) F(uint32_t, kcount) F(uint32_t, pad2)
WGNN_UNIFORM(SubgroupMatmulParams, WGNN_SUBGROUP_GEMM_FIELDS);
static_assert(sizeof(SubgroupMatmulParams) == 80);

// The uniform of the convolution mode: the product's parameters (M = Co,
// N = OH*OW, K = Ci*KH*KW, b_batch = Ci*H*W), then the convolution's: the
// input plane H, W, H*W and Ci*H*W; the output width, KH*KW and KW; strides
// and begin pads; dilations and the kernel's spans (KH*dil_h, KW*dil_w);
// and the fixed count of rows a thread's reduction rows advance by, as
// (channels * H*W, rows of taps * dil_h, taps * dil_w) (config dependent).
// Coordinates are u32 and wrap: a tap left of or above the image has a
// huge unsigned coordinate, which the bounds checks reject.
#define WGNN_SUBGROUP_CONV_FIELDS(F)                                                                          \
  WGNN_SUBGROUP_GEMM_FIELDS(F)                                                                                \
  F(uint32_t, in_h) F(uint32_t, in_w) F(uint32_t, in_hw) F(uint32_t, chw) F(uint32_t, out_w) F(uint32_t, khw)   \
      F(uint32_t, kw) F(uint32_t, cpad0) F(uint32_t, stride_h) F(uint32_t, stride_w) F(uint32_t, top)           \
          F(uint32_t, left) F(uint32_t, dil_h) F(uint32_t, dil_w) F(uint32_t, span_h) F(uint32_t, span_w)       \
              F(uint32_t, step_c) F(uint32_t, step_y) F(uint32_t, step_x) F(uint32_t, cpad1)
WGNN_UNIFORM(SubgroupConvParams, WGNN_SUBGROUP_CONV_FIELDS);
static_assert(sizeof(SubgroupConvParams) == 160);
static_assert(offsetof(SubgroupConvParams, in_h) == 80);

// WGSL `round_f16(v: f32) -> f32` (ops/kernels/lib/f16.wgsl): v rounded to
// float16's precision, in integer arithmetic. For the convolutions' affine_rounded.
std::string round_f16_wgsl();

// The WGSL of one configuration. Throws wgnn::Error for an invalid one.
std::string subgroup_matmul_wgsl(const SubgroupMatmulConfig& cfg);

// A configuration from its text form BMxBNxBK:SGMxSGN:STAGES[:v|:f] with
// optional /dN (tiles in flight), /tN (1: A stored transposed, 2: B, 3: both), /r (unrotated
// stores), /c (checked loads), /w (word loads), /pN (unused workgroup
// memory), /v (vec4 workgroup tiles), /aN (benchmark ablations). Throws
// wgnn::Error naming the text when it is malformed or invalid.
SubgroupMatmulConfig parse_subgroup_matmul_config(const std::string& text);

// Whether the device runs this kernel: the subgroup-matrix feature with the
// f16 x f16 -> f32 16x16x16 configuration, shader-f16, subgroup size 32, and
// workgroup storage for the configuration (emulated: shader-f16 and the
// workgroup storage).
bool subgroup_matmul_supported(const gpu::Context& ctx, const SubgroupMatmulConfig& cfg = {});
// WGNN_SUBGROUP_MATMUL=emulate: the tensor-core kernels run emulated and
// take every product they can (their tests).
bool subgroup_matmul_emulated(const Settings& settings);
// Whether record_subgroup_gemm / record_subgroup_conv may record anything
// on this device (the kernels, or their emulation under
// WGNN_SUBGROUP_MATMUL=emulate; not under WGNN_SUBGROUP_MATMUL=0).
bool tensor_cores_available(const gpu::Context& ctx);

// One product for record_subgroup_gemm: out[b] = alpha * op(A[b]) @ op(B[b])
// + beta * bias, every tensor float16 and contiguous per batch; element
// strides per batch (0: shared), the bias read at bias_batch * b +
// m * bias_sm + n * bias_sn.
struct SubgroupGemm {
  TensorRef a, b, bias{-1}, out;
  int64_t M = 0, N = 0, K = 0, batch = 1;
  bool a_trans = false, b_trans = false;  // A stored K x M, B stored N x K
  int64_t a_batch = 0, b_batch = 0, bias_batch = 0, bias_sm = 0, bias_sn = 0;
  double alpha = 1, beta = 1;
  ActivationSpec act;  // applied last (ops/epilogue.h)
  // Optional float32 [2, M]: out[m][n] = (alpha * A @ B + beta * bias) *
  // affine[0][m] + affine[1][m], before the activation.
  TensorRef affine{-1};
  bool affine_rounded = false;  // the value before the affine rounded to float16
  // Split-K (SubgroupMatmulConfig::splitk), where kchunk > 0: `splits`
  // ranges (one or more) of `kchunk` (a multiple of 32) each, written to a new float32 [splits, batch * M *
  // N] tensor of the ranges' plain sums (no bias, alpha 1, no activation or
  // affine; `out` unused) for the caller's second pass.
  // subgroup_gemm_splits() says how many.
  int64_t splits = 1, kchunk = 0;
  // Optional float16, the result's shape: added after the activation, or
  // with residual_first (a convolution's order, wgnn.convolution_padded)
  // to the value rounded to float16 before it.
  TensorRef residual{-1};
  bool residual_first = false;
};

// The ranges of K that a product M x N x K (times `batch`) on subgroup
// matrices is cut into, and their length (a multiple of the tiles' 32), so
// that products of few tiles fill the GPU: 1 (no split) where the tiles
// are enough, K is short, or WGNN_SUBGROUP_SPLITK=0; WGNN_SUBGROUP_SPLITK=N
// (tuning) cuts every product of at least 2 * N steps of 32 into N.
struct SubgroupSplit {
  int64_t splits = 1, kchunk = 0;
};
// `conv`: a convolution's (M output channels, N pixels), whose tiles stay
// 64x64 where a product of few tiles takes 32x64.
SubgroupSplit subgroup_gemm_splits(const Settings& settings, int64_t M, int64_t N, int64_t K, int64_t batch,
                                   bool conv = false);

// Records the product on subgroup matrices when the device has them (and
// WGNN_SUBGROUP_MATMUL is not 0) and the operands suit the kernel: float16,
// N, and the rows of A and B as stored, multiples of 8 elements; the
// workgroup grid within the device's limits. Returns false (recording
// nothing) otherwise: the caller falls back to its regular kernel. `what`
// starts the dispatch label ("gemm", "conv 1x1"). The tiles: 128x128 on 4
// subgroups (64x64 each) where there are at least 300 of them, K is at
// least 256 and N more than 128, else 64x64 on 4, 64 deep where at most
// 264 of them run whole (no split-K) and K is at least 128, else 32 deep
// (docs/BENCHMARKS.md);
// WGNN_SUBGROUP_MATMUL_CONFIG overrides them (tuning, tests).
// WGNN_SUBGROUP_MATMUL=emulate runs the emulated kernel (SubgroupMatmulConfig::
// emulate) on any device with shader-f16: for testing the generated kernel
// where there are no subgroup matrices.
// With p.splits > 1, `part` receives the new tensor of the ranges' sums.
bool record_subgroup_gemm(Graph& g, const SubgroupGemm& p, std::string_view op, std::string_view what,
                          TensorRef* part = nullptr);

// One 2-D convolution (forward, one group; a 1-D one as H = 1) for
// record_subgroup_conv: out[b] [Co, OH*OW] = W [Co, Ci*KH*KW] @ im2col(X[b])
// + bias[co], every tensor float16 and contiguous (NCHW).
struct SubgroupConv {
  TensorRef x, w, bias{-1}, out;
  int64_t batch = 1, cin = 0, h = 0, w_in = 0, cout = 0, oh = 0, ow = 0, kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1, top = 0, left = 0, dil_h = 1, dil_w = 1;  // top, left: begin pads
  ActivationSpec act;  // as SubgroupGemm::act
  TensorRef affine{-1};  // as SubgroupGemm::affine (per output channel)
  bool affine_rounded = false;
  // Split-K (subgroup_gemm_splits) where kchunk > 0, one image only: the ranges' float32
  // sums [splits, Co * OH*OW] go to a new tensor, `part` of
  // record_subgroup_conv, with no bias, affine or activation (the caller's
  // sum pass applies them); the layout of the regular convolution's parts.
  int64_t splits = 1, kchunk = 0;
  // Optional float16 of the result's shape, added before the activation
  // (SubgroupGemm::residual_first); OH*OW a multiple of 8.
  TensorRef residual{-1};
};

// Records the convolution as an implicit GEMM on subgroup matrices (the
// convolution mode above) under record_subgroup_gemm's conditions
// (WGNN_SUBGROUP_MATMUL, float16, K = Ci*KH*KW a multiple of 8, the grid),
// its tile choice and WGNN_SUBGROUP_MATMUL_CONFIG, with every index within
// the int32 range. Returns false (recording nothing) otherwise. `what`
// starts the dispatch label ("conv 3x3"). With p.splits > 1, `part`
// receives the new tensor of the ranges' sums.
bool record_subgroup_conv(Graph& g, const SubgroupConv& p, std::string_view op, std::string_view what,
                          TensorRef* part = nullptr);

}  // namespace wgnn::ops
