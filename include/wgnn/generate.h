#pragma once
// Generation with a decoder (and an encoder): wgnn::generate::Generator, its
// key/value cache on the GPU, the next token chosen on the GPU.
#include "generate/generate.h"
