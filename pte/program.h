#pragma once
// ExecuTorch programs (.pte) -> IR: the front end for models lowered by
// ExecuTorch, as `to_edge_transform_and_lower(...).to_executorch()` writes
// them.
//
// A .pte is a flatbuffer (ExecuTorch's program.fbs, identifier "ET12") with
// an extended header ("eh00") and data segments after it. One method's
// execution plan (default "forward") is read: its values (tensors, scalars,
// lists), its inputs and outputs, and its instructions in order:
//   - a DelegateCall to the Vulkan/WebGPU delegate (id "VulkanBackend"; the
//     WebGPU partitioner serializes through it) is read from its payload (a
//     "VH00" header, a VkGraph flatbuffer of vulkan_schema.fbs, raw constant
//     bytes) and its op calls become IR nodes;
//   - a KernelCall to a portable kernel left outside the delegate
//     (`aten::mean.out`) becomes the functional op's IR node
//     (`aten.mean.dim`): wgnn runs it on the GPU too.
// Every op of both, ATen-named, maps to wgnn's op of the same name, or is
// rewritten into wgnn ops where ExecuTorch uses an `_copy` or a custom form
// (pte/aten.cpp). Anything the front end cannot run (another backend's
// delegate, control flow, an op without a mapping, weights in a separate
// .ptd file, a dynamic shape without a bound) is an Unsupported error at
// load that lists all of it. A mutable buffer (memory the program keeps
// between runs and writes back with aten::copy_: a KV cache) is state:
// Model::states. The flatbuffers are verified before they are read; every
// offset and size is checked against the file.
//
// Inputs and outputs are named "input_0", ... and "output_0", ... (a .pte
// carries no names); their dtypes and shapes are the program's.
//
// Dynamic shapes: a program exported with torch.export.Dim bounds declares
// each dynamic tensor at its bound (ExecuTorch plans memory for it).
// load() reads it at the bounds; load_at_sizes() reads it again for other
// input sizes (each dim at most its bound), and every result's shape then
// follows from its op (the IR lowered node by node onto a graph that only
// follows shapes), or from the op's rule where the translation needs the
// shape first (views, factories, pte/aten.h). The sizes ExecuTorch computes
// while it runs (sym_size, and int arithmetic on sizes, in the delegate or
// as executorch_prim kernels) are computed while it reads.
#include <string>
#include <string_view>
#include <vector>

#include "graph/host_tensor.h"
#include "graph/tensor.h"
#include "ir/graph.h"

namespace wgnn::gpu {
class Context;
}

namespace wgnn::pte {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  Shape max_shape;  // a dynamic tensor's bound, each dim (empty: static)
};

// A mutable buffer the method reads and writes back (aten::copy_ at its
// end: a KV cache): its value persists from one run to the next. In the IR
// it is an input (`input`, its value before the run) and an output
// (`output`, after it); a Session feeds each run's output to the next.
struct State {
  std::string input, output;
  HostTensor initial;  // the program's initial value, or zeros where it stores none
};

struct Model {
  ir::Graph ir;
  std::vector<TensorInfo> inputs, outputs;
  std::string method;                  // the execution plan read
  std::vector<std::string> methods;    // every execution plan of the file
  int delegate_calls = 0;              // delegated subgraphs
  int kernel_calls = 0;                // portable kernels outside a delegate
  std::vector<std::string> ops;        // the distinct ops, as the file names them
  bool dynamic = false;                // an input has a dynamic shape (max_shape)
  std::vector<State> states;           // mutable buffers (not among inputs/outputs)
};

// Whether these first bytes of a file are an ExecuTorch program's (the
// flatbuffer identifier "ET12" at offset 4).
bool is_pte(std::string_view head);

// Reads a .pte file; `method` empty: "forward", or the only method.
Model load(const std::string& path, const std::string& method = {});
// The same from bytes in memory (`name` in messages).
Model load_from_bytes(std::string_view bytes, const std::string& name, const std::string& method = {});

// The same program read for these input shapes (one per input, in order;
// each dim at most its bound, a static input's exactly): the IR of a plan
// at those sizes. `ctx` makes the graph that follows shapes (nothing is
// recorded on the GPU).
Model load_at_sizes(std::string_view bytes, const std::string& name, const std::string& method,
                    const std::vector<Shape>& input_shapes, gpu::Context& ctx);

// The ops the front end maps (functional ATen names and ExecuTorch's
// custom ones), sorted; a portable kernel's out variant maps through its
// functional name.
std::vector<std::string> supported_ops();

}  // namespace wgnn::pte
