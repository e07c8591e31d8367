#pragma once
// The model IR: build a graph of op calls (wgnn::ir::Graph), rewrite it with
// the project's passes (wgnn::passes::optimize: fusions, constant folding,
// dead code) and run it at any input shape (wgnn::ir::Program).
#include "ir/graph.h"
#include "ir/program.h"
#include "passes/passes.h"
