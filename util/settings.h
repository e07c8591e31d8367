#pragma once
// The settings a caller passes to the runtime (gpu::ContextOptions::settings):
// switches for measuring kernels, the paths of caches and dependencies, the
// Vulkan driver files. Each is named after the environment variable that the
// front ends (the CLI, the C API, the Python and Node packages) map onto it:
// the library itself reads no environment variable, so what a call does
// depends only on what its caller passed. docs/SETTINGS.md lists them.
//
//   wgnn::Settings s;                       // nothing set: every default
//   s.set("WGNN_MATMUL_TILE", "32x64");     // an unknown name is an Error
//   auto from_env = wgnn::Settings::from_variables(std::getenv);
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace wgnn {

struct SettingInfo {
  const char* name;  // the environment variable's name
  const char* what;  // one line: what it does
};

class Settings {
 public:
  using Lookup = std::function<const char*(const char*)>;

  // Every known setting that `lookup` (std::getenv, or a test's table) gives
  // a value, empty values included.
  static Settings from_variables(const Lookup& lookup);

  // Sets `name` (one of known()); an unknown name is an Error listing the
  // known names that share its first word.
  void set(std::string_view name, std::string value);
  void unset(std::string_view name);
  // The value, or nullptr when unset. `name` must be one of known().
  const char* get(std::string_view name) const;
  // get() as a string, "" when unset.
  std::string value(std::string_view name) const;
  // Whether `name` is set to exactly `v`.
  bool is(std::string_view name, std::string_view v) const;
  bool empty() const { return values_.empty(); }
  const std::map<std::string, std::string, std::less<>>& values() const { return values_; }

  static const std::vector<SettingInfo>& known();

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace wgnn
