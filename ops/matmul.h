#pragma once
// What ops/matmul.cpp fills into kernels/matmul.wgsl besides its tile:
// the multiply of one k step and the stores, written out for a thread's
// RM x RN block (RM and RN 4 or 8), every accumulator index a constant.
#include <cstdint>
#include <string>

namespace wgnn::ops {

std::string matmul_multiply(uint32_t rm, uint32_t rn);
std::string matmul_store(uint32_t rm, uint32_t rn);

}  // namespace wgnn::ops
