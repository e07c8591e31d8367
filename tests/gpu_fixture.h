#pragma once
// One Context for the whole test binary: creating a device on lavapipe takes
// a moment, and the pipeline cache is per Context. Its settings start as the
// environment's (as the CLI maps them); tests change them with
// test::ScopedSetting (scoped_env.h).
#include <cstdlib>

#include "gpu/context.h"

namespace wgnn::test {

inline gpu::Context& ctx() {
  static gpu::Context* c = [] {
    gpu::ContextOptions o;
    o.settings = Settings::from_variables(&std::getenv);
    return new gpu::Context(o);  // lives for the process
  }();
  return *c;
}

// Options for a test's own Context: test::ctx()'s settings (the
// environment's, and any test::ScopedSetting in force), under those `o`
// sets itself. Call it where the Context is made, so the settings in force
// then are the ones it gets.
inline gpu::ContextOptions options(gpu::ContextOptions o = {}) {
  Settings merged = ctx().settings();
  for (const auto& [name, value] : o.settings.values()) merged.set(name, value);
  o.settings = std::move(merged);
  return o;
}

}  // namespace wgnn::test
