#pragma once
// The whole C++ API in one include.
#include "wgnn/context.h"
#include "wgnn/error.h"
#include "wgnn/generate.h"
#include "wgnn/graph.h"
#include "wgnn/host_tensor.h"
#include "wgnn/ir.h"
#include "wgnn/ops.h"
#include "wgnn/session.h"
#include "wgnn/version.h"
#include "wgnn/wgnn.h"  // wgnn_version(): the library's own version

