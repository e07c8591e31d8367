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
  ScopedSetting(const char* name, const char* value) : name_(name) {
    Settings& s = ctx().mutable_settings();
    if (const char* old = s.get(name)) old_ = old;
    s.set(name, value);
  }
  ~ScopedSetting() {
    Settings& s = ctx().mutable_settings();
    if (old_) s.set(name_, *old_);
    else s.unset(name_);
  }
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace wgnn::test
