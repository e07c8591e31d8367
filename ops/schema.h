#pragma once
// Op schemas: an op's arguments by name, in order, each with its default
// (none: required). Passes that rewrite a node address its arguments by
// name through them (NamedArgs) rather than by position, and an
// epilogue's activation is written from ops::ActivationSpec, the one
// activation list (ops/epilogue.h). Declared for the ops whose arguments
// the passes write: the fused convolution, product and norms with their
// epilogues (ops/conv.cpp, ops/matmul.cpp, ops/norm.cpp document each);
// tests/ops/schema_test.cpp checks every schema against its op.
#include <string>
#include <string_view>
#include <vector>

#include "graph/tensor.h"
#include "ops/epilogue.h"

namespace wgnn::ops {

struct ArgSchema {
  std::string name;
  bool required = false;
  Value def;  // the default of an optional argument
};

struct OpSchema {
  std::string op;
  std::vector<ArgSchema> args;
  // The position of argument `name`; an Error naming the op's arguments
  // when it has none of that name.
  size_t index(std::string_view name) const;
};

// The schema of `op` ("wgnn.convolution_padded.default"), or null where
// none is declared; schema() throws instead.
const OpSchema* find_schema(std::string_view op);
const OpSchema& schema(std::string_view op);
// Every declared schema (tests).
const std::vector<OpSchema>& schemas();

// An op's argument list addressed by name through its schema: an absent
// argument reads as its default; writing one past the end fills those
// between with their defaults (a required one left out is an Error).
class NamedArgs {
 public:
  NamedArgs(std::string_view op, ValueList& args);
  const Value& get(std::string_view name) const;
  void set(std::string_view name, Value v);
  // An argument given as None takes its default.
  void default_if_none(std::string_view name);
  // The epilogue's activation as the op's act, lo and hi arguments.
  void set_activation(const ActivationSpec& a);
  ActivationSpec activation() const;  // "none" where act is absent

 private:
  const OpSchema& s_;
  ValueList& args_;
};

}  // namespace wgnn::ops
