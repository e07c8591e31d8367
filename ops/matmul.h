#pragma once
// What ops/matmul.cpp shares with the kernel tests.
#include <cstdint>
#include <string>

namespace wgnn::ops {

// The epilogue of kernels/matmul.wgsl ({{EPILOGUE}}) for RM x RN blocks per
// invocation: one store_block call per vec4 of the accumulator, each with a
// constant index into it.
std::string matmul_epilogue(uint32_t rm, uint32_t rn);

}  // namespace wgnn::ops
