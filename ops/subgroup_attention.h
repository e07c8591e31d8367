#pragma once
// Scaled-dot-product attention on subgroup matrices (tensor cores), for
// wgnn.attention.default in float16 (ops/attention.cpp):
//   O[b, h, l, :] = softmax_s(scale * q[b, h, l, :] . k[b, h, s, :] + mask[b, h, l, s]) @ v[b, h, s, :]
// in one dispatch, without the L x S scores in memory.
//
// A workgroup takes 16 * SG queries of one (b, h); each of its SG subgroups
// owns 16 of them. Keys go in blocks of BKV, staged with the block's K and V
// rows in workgroup memory (float16), in one pass (online softmax):
//   1. S = q k^T on subgroup matrices (16x16x16, f32 results), stored to a
//      per-subgroup scratch; each of the two lanes of a query row reads
//      its half of the row's scale * S + mask once (into registers), and the
//      pair shares its maxima for the block's max.
//   2. The row's running max m is raised to the block's only where that
//      passes m by more than TAU (8): then the row's sum and O are scaled by
//      e^(m_old - m_new). O lives in subgroup matrices, which have no
//      per-row scaling, so a flag read with workgroupUniformLoad sends every
//      subgroup through the scratch (store, scale the rows, load back).
//      Scores that never climb 8 past their first block's max never do.
//   3. p = exp(scale * S + mask - m) (below e^8, held in float16), summed by
//      the lanes and written into a per-subgroup P tile; O += P @ V on
//      subgroup matrices.
// At the end O / sum is written through the result's strided view. Keys
// past S score -inf (p = 0, their staged V rows zeros); a row masked -inf
// everywhere keeps m at the lowest float, weighs nothing and gives 0 / 0 =
// NaN, as the math and ops/kernels/attention.wgsl do.
//
// Like the tensor-core GEMM (ops/subgroup_matmul.h), `emulate` replaces the
// subgroup matrices with scalar code over the same workgroup tiles, so that
// the staging, the softmax and the epilogue are tested on any device with
// shader-f16 (WGNN_SUBGROUP_MATMUL=emulate).
#include <cstdint>
#include <string>

#include "gpu/context.h"

namespace wgnn::ops {

struct SubgroupAttentionConfig {
  uint32_t d = 64, dv = 64;  // head dims of q / k and of v: multiples of 16, at most 128
  uint32_t sg = 4;           // subgroups per workgroup: 16 * sg queries
  uint32_t bkv = 32;         // keys per block: a multiple of 16
  bool mask = false;         // an additive mask (binding 5)
  bool mask_f16 = false;     // ... stored as float16 (else float32)
  // q, k and v read as vec4<u32> (8 halves) along the head dim: its stride
  // 1, the head dims, the offsets and the other strides multiples of 8.
  bool vec = false;
  // With vec: the next key block's rows loaded into registers while this
  // one is multiplied (WGNN_SUBGROUP_ATTENTION_PREFETCH=0: not). On an H200
  // the Whisper encoder's attention went from 178 to 146 µs per layer.
  bool prefetch = true;
  // q held in registers as each subgroup's left matrices for the whole
  // kernel (staged 16 rows at a time through the K tile at the start), not
  // as a 16 * SG x D tile in workgroup memory: 9 KB less for head dims of 64,
  // three workgroups per multiprocessor instead of two where the driver
  // gives 48 KB (WGNN_SUBGROUP_ATTENTION_QREG=0: the tile).
  bool qreg = true;
  // The keys cut into params.ksplits ranges of params.kchunk (a multiple
  // of bkv), one workgroup per (range, b, h, query tile): each writes its
  // rows' unnormalised O, max and sum (float32, the binding after the
  // mask's: [range][b][h][l][Dv + 4], attention_part_row) and subgroup_attention_combine_wgsl's
  // pass merges them. For
  // few (b, h, query tile) groups over many keys (the Whisper encoder's 8
  // heads of 1,500 frames: 192 workgroups of 4 subgroups on 132
  // multiprocessors), which leave much of the GPU idle.
  bool ksplit = false;
  // With prefetch: V in two tiles, the block ahead put into the one not
  // being read, and K's put after the block's scores are stored (they are
  // the last reads of K), both before the barrier ahead of P @ V. That
  // barrier then also hands the next block's tiles over: two barriers a
  // block instead of four (WGNN_SUBGROUP_ATTENTION_VTILES=1: one V tile).
  bool v_double = true;
  // The two lanes of a row share their halves' maxima and their sums by
  // subgroupShuffleXor (subgroups of 32 lanes); otherwise through workgroup
  // memory (two barriers more a block: the emulated kernel, which runs on
  // any subgroup size).
  bool shuffle = false;
  // The P tile's rows 8 halves longer than the block (against bank
  // conflicts of the matrix loads); WGNN_SUBGROUP_ATTENTION_PPAD=0: not.
  bool p_pad = true;
  bool emulate = false;

  bool two_v_tiles() const;   // v_double in effect (it needs prefetch)
  bool pair_shuffle() const;  // shuffle in effect (not emulated)
  uint32_t threads() const { return sg * 32; }
  uint32_t queries() const { return sg * 16; }
  uint32_t workgroup_bytes() const;
  std::string name() const;
};

// The WGSL of a configuration; throws wgnn::Error for an invalid one. The
// bindings and the uniform (AttentionParams, params.splits 0) are
// ops/kernels/attention.wgsl's.
std::string subgroup_attention_wgsl(const SubgroupAttentionConfig& cfg);

// The second pass of the key-split mode: out (float16, through the
// result's view) = sum_r e^(m_r - M) O_r / sum_r e^(m_r - M) l_r, M the
// largest m_r, one thread per four values of a row. Bindings: out, params,
// the parts (binding 2).
std::string subgroup_attention_combine_wgsl(uint32_t dv);

// Floats in a row of the key-split parts: Dv values, the max, the sum and
// two unused (rows 16-byte aligned for the merge pass's vec4 reads).
uint32_t attention_part_row(uint32_t dv);

// The configuration for head dims d, dv and `queries` rows per (b, h):
// blocks of 16 keys, the most subgroups (up to 4; up to 2 for at most 256
// queries) that fit the device's workgroup memory; sg 0 where none fits or
// the head dims are not multiples of 16 up to 128.
SubgroupAttentionConfig pick_subgroup_attention(const gpu::Context& ctx, uint32_t d, uint32_t dv,
                                                uint64_t queries = UINT64_MAX);

}  // namespace wgnn::ops
