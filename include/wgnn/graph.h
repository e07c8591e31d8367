#pragma once
// wgnn::Graph: tensors on the GPU, ops recorded into dispatches, run.
#include "graph/graph.h"
