// util/settings.h: known names only, values set and unset, the mapping from a
// lookup (the front ends pass std::getenv), and a Context that reads only
// what it was given.
#include "util/settings.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "error_of.h"
#include "gpu/context.h"
#include "gpu_fixture.h"

using namespace wgnn;

TEST(Settings, KnownNamesOnly) {
  Settings s;
  EXPECT_EQ(s.get("WGNN_MATMUL_TILE"), nullptr);
  s.set("WGNN_MATMUL_TILE", "32x64");
  EXPECT_STREQ(s.get("WGNN_MATMUL_TILE"), "32x64");
  EXPECT_TRUE(s.is("WGNN_MATMUL_TILE", "32x64"));
  EXPECT_EQ(s.value("WGNN_MATMUL_CONFIG"), "");
  s.set("WGNN_TIERED", "");  // set, empty: as an empty variable
  ASSERT_NE(s.get("WGNN_TIERED"), nullptr);
  EXPECT_STREQ(s.get("WGNN_TIERED"), "");
  s.unset("WGNN_MATMUL_TILE");
  EXPECT_EQ(s.get("WGNN_MATMUL_TILE"), nullptr);
  const std::string e = test::error_of([&] { s.set("WGNN_MATMUL_TILES", "32x64"); });
  EXPECT_NE(e.find("unknown setting 'WGNN_MATMUL_TILES'"), std::string::npos) << e;
  EXPECT_NE(e.find("WGNN_MATMUL_TILE"), std::string::npos) << "names the near ones: " << e;
  EXPECT_NE(test::error_of([&] { s.get("PATH"); }).find("unknown setting 'PATH'"), std::string::npos);
}

TEST(Settings, FromVariablesTakesEveryKnownOneTheLookupGives) {
  static std::map<std::string, std::string> vars;
  vars = {{"WGNN_NO_VIEWS", "1"}, {"HOME", "/home/u"}, {"PATH", "/bin"}, {"WGNN_TIERED", ""}};
  const Settings s = Settings::from_variables([](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  EXPECT_STREQ(s.get("WGNN_NO_VIEWS"), "1");
  EXPECT_STREQ(s.get("HOME"), "/home/u");
  ASSERT_NE(s.get("WGNN_TIERED"), nullptr);
  EXPECT_EQ(s.values().size(), 3u) << "PATH is no setting";
  for (const auto& k : Settings::known()) {
    EXPECT_GT(std::strlen(k.what), 10u) << k.name;
  }
}

TEST(Settings, AContextReadsWhatItWasGivenNotTheEnvironment) {
  // A malformed setting given: an Error naming it. The same in the
  // environment, not given: no effect on a Context made without it.
  gpu::ContextOptions bad;
  bad.settings.set("WGNN_GPU_TIMEOUT_S", "soon");
  EXPECT_NE(test::error_of([&] { gpu::Context c(bad); }).find("WGNN_GPU_TIMEOUT_S='soon'"), std::string::npos);
  ::setenv("WGNN_GPU_TIMEOUT_S", "soon", 1);
  const std::string e = test::error_of([] { gpu::Context c; });
  ::unsetenv("WGNN_GPU_TIMEOUT_S");
  EXPECT_EQ(e, "no error");
  gpu::ContextOptions o;
  o.settings.set("WGNN_NO_VIEWS", "1");
  gpu::Context c(o);
  EXPECT_TRUE(c.settings().is("WGNN_NO_VIEWS", "1"));
}
