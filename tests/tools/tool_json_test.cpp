// The JSON writer shared by gpmkit's tools (tools/common/json.hpp): escaping, numbers that read
// back exactly, non-finite numbers, nesting, key order, and both output forms.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "json.hpp"

namespace {

namespace json = gpmkit::json;

TEST(ToolJson, EscapesQuotesBackslashesControlCharactersAndBadUtf8) {
  EXPECT_EQ(json::quote(std::string("a\"b\\c\n\t\x01\x1f\xc3\xa9", 11)),
            "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f\xc3\xa9\"");
  EXPECT_EQ(json::quote("\xff"), "\"\\ufffd\"");
}

TEST(ToolJson, CompactLineKeepsKeyOrderAndNesting) {
  json::object inner;
  json::array list;
  list.emplace_back(true);
  list.emplace_back(nullptr);
  list.emplace_back("x");
  json::object o;
  o.add("b", 1);
  o.add("a", std::move(list));
  o.add("c", std::move(inner));
  EXPECT_EQ(json::to_line(o), R"({"b":1,"a":[true,null,"x"],"c":{}})");
}

TEST(ToolJson, NumbersReadBackExactlyAndNonFiniteBecomesNull) {
  json::array a;
  a.emplace_back(0.1);
  a.emplace_back(1e-7);
  a.emplace_back(std::uint64_t{18446744073709551615ull});
  a.emplace_back(std::int64_t{-5});
  a.emplace_back(std::numeric_limits<double>::quiet_NaN());
  a.emplace_back(std::numeric_limits<double>::infinity());
  EXPECT_EQ(json::to_line(a), "[0.1,1e-07,18446744073709551615,-5,null,null]");
}

TEST(ToolJson, IndentedFormPutsEachMemberOnItsOwnLine) {
  json::object o;
  o.add("k", "v");
  o.add("n", 2);
  std::ostringstream out;
  json::write(out, o);
  EXPECT_EQ(out.str(), "{\n  \"k\": \"v\",\n  \"n\": 2\n}");
}

}  // namespace
