// text::ChatTemplate against Python's jinja2 rendering as transformers'
// apply_chat_template does (tests/data/text/chat_template_cases.json).
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "gpu/error.h"

namespace wgnn::text {
namespace {

const std::string kData = std::string(WGNN_SOURCE_DIR) + "/tests/data/text/";

nlohmann::ordered_json load_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::ordered_json::parse(ss.str());
}

TEST(ChatTemplate, RendersAsTransformers) {
  const nlohmann::ordered_json all = load_json(kData + "chat_template_cases.json")["templates"];
  ASSERT_EQ(all.size(), 4u);
  int rendered = 0, raised = 0;
  for (const auto& t : all) {
    const ChatTemplate tmpl(t["template"].get<std::string>(), t["bos_token"].get<std::string>(),
                            t["eos_token"].get<std::string>());
    for (const auto& c : t["cases"]) {
      const std::string messages = c["messages"].dump();
      const bool gen = c["add_generation_prompt"].get<bool>();
      if (c.contains("error")) {
        try {
          tmpl.render_json(messages, gen);
          ADD_FAILURE() << t["name"] << ": no error for " << messages;
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos)
              << t["name"] << ": " << e.what();
          ++raised;
        }
        continue;
      }
      EXPECT_EQ(tmpl.render_json(messages, gen), c["expected"].get<std::string>()) << t["name"] << ": " << messages;
      ++rendered;
    }
  }
  EXPECT_GE(rendered, 25);
  EXPECT_GE(raised, 2);
}

TEST(ChatTemplate, MessagesFromStructs) {
  const ChatTemplate t("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                       "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}",
                       "<s>", "</s>");
  EXPECT_EQ(t.render({{"system", "Be \"brief\"."}, {"user", "Caf\u00e9\n"}}, true),
            "<system>Be \"brief\".<user>Caf\u00e9\n<assistant></s>");
}

TEST(ChatTemplate, StrftimeNowAndMoreContext) {
  const ChatTemplate t("{{ strftime_now('%Y') }}|{{ tools is none }}|{{ documents is none }}|{{ custom }}");
  const std::string s = t.render_json("[]", false, "{\"custom\": 7}");
  EXPECT_TRUE(std::regex_match(s, std::regex("[0-9]{4}\\|True\\|True\\|7"))) << s;
}

TEST(ChatTemplate, ErrorsSayWhat) {
  try {
    ChatTemplate("{% for %}").render({}, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not parse"), std::string::npos) << e.what();
  }
  try {
    ChatTemplate("{{ raise_exception('Only user and assistant roles are supported!') }}").render({}, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Only user and assistant roles are supported!"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ChatTemplate("x").render_json("{\"not\": \"a list\"}", true), Error);
}

}  // namespace
}  // namespace wgnn::text
