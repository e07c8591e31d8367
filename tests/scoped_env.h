#pragma once
// Sets one of the runtime's settings (util/settings.h) on the tests' shared
// Context for one scope, and puts back what it was. The library reads no
// environment variable; the tests switch kernels and features through the
// same settings the CLI maps the environment onto. A test that makes its own
// Context starts it from test::ctx().settings() to see these.
#include <optional>
#include <string>

#include "gpu_fixture.h"
#include "util/settings.h"

namespace wgnn::test {

class ScopedSetting {
 public:
  ScopedSetting(const char* name, const char* value) : ScopedSetting(ctx(), name, value) {}
  // On another Context: a setting on ctx() does not reach a Context made
  // before it was set.
  ScopedSetting(gpu::Context& c, const char* name, const char* value) : settings_(&c.mutable_settings()), name_(name) {
    if (const char* old = settings_->get(name)) old_ = old;
    settings_->set(name, value);
  }
  ~ScopedSetting() {
    if (old_) settings_->set(name_, *old_);
    else settings_->unset(name_);
  }
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  Settings* settings_;
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace wgnn::test
