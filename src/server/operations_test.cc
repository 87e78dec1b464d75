// The operation table (delayq/operations.h) against the front-ends and the
// docs: every beanstalkd command of a row is decoded as that row, every
// command the decoder knows is in the table; every route of a row is
// served by the HTTP API, and it serves no other; every row is documented,
// and docs/architecture.md's table is the table. Counting by row: the
// beanstalkd handler's `stats` and HTTP's counters (http_api_test.cc);
// durability, the Local backend's test.
#include "delayq/operations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "server/beanstalk_decoder.h"
#include "server/http_api_internal.h"

namespace delayq::server {
namespace {

std::string ReadDoc(std::string_view name) {
  const std::string path = std::string(DELAYQ_SOURCE_DIR) + "/docs/" + std::string(name);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << "cannot read " << path;
  return ss.str();
}

TEST(Operations, EveryBeanstalkCommandIsDecodedAsItsRow) {
  std::set<std::string_view> decoded;
  for (size_t b = 0; b < kNumBeanOps; ++b) {
    BeanOp op = static_cast<BeanOp>(b);
    const Operation& row = OperationOf(OperationOf(op));
    std::vector<std::string_view> verbs = BeanstalkCommandsOf(row);
    EXPECT_NE(std::find(verbs.begin(), verbs.end(), BeanVerb(op)), verbs.end())
        << "the decoder maps '" << BeanVerb(op) << "' to the row '" << row.name
        << "', which does not list it";
    decoded.insert(BeanVerb(op));
  }
  for (const Operation& row : kOperations)
    for (std::string_view verb : BeanstalkCommandsOf(row))
      EXPECT_TRUE(decoded.contains(verb))
          << "the row '" << row.name << "' lists '" << verb << "', which the decoder does not know";
}

TEST(Operations, TheHttpRoutesAreTheTablesRoutes) {
  std::set<std::string> routes;
  for (const Operation& row : kOperations) {
    for (std::string_view spec : HttpRoutesOf(row)) {
      EXPECT_TRUE(routes.insert(std::string(spec)).second) << spec << " is in two rows";
      auto h = std::find_if(HttpApiRoutes::Handlers().begin(), HttpApiRoutes::Handlers().end(),
                            [&](const HttpApiRoutes::Mapping& m) { return m.route == spec; });
      EXPECT_NE(h, HttpApiRoutes::Handlers().end())
          << "the row '" << row.name << "' lists " << spec << ", which has no handler";
    }
  }
  for (const HttpApiRoutes::Mapping& m : HttpApiRoutes::Handlers())
    EXPECT_TRUE(routes.contains(std::string(m.route)))
        << m.route << " has a handler but no row of the operation table";
  // The dispatch table holds each route once, with its row.
  ASSERT_EQ(HttpApiRoutes::Table().size(), routes.size());
  for (const HttpApiRoutes::Route& r : HttpApiRoutes::Table()) {
    std::string spec = std::string(r.method) + " ";
    for (std::string_view seg : r.path) spec += "/" + std::string(seg);
    std::vector<std::string_view> of_row = HttpRoutesOf(OperationOf(r.op));
    EXPECT_NE(std::find(of_row.begin(), of_row.end(), spec), of_row.end())
        << spec << " is dispatched as '" << OperationOf(r.op).name << "'";
  }
}

// The routes the "## Routes" table of docs/http-api.md names: every
// `METHOD /path` in the first cell of its rows.
std::set<std::string> DocumentedRoutes(const std::string& doc) {
  std::set<std::string> out;
  std::istringstream in(doc);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) inside = line == "## Routes";
    if (!inside || !line.starts_with("| `")) continue;
    std::string_view cell = std::string_view(line).substr(2);
    cell = cell.substr(0, cell.find(" |"));
    for (size_t open = cell.find('`'); open != std::string_view::npos;
         open = cell.find('`', open)) {
      size_t close = cell.find('`', open + 1);
      if (close == std::string_view::npos) break;
      out.insert(std::string(cell.substr(open + 1, close - open - 1)));
      open = close + 1;
    }
  }
  return out;
}

TEST(Operations, EveryRowIsDocumented) {
  const std::string protocol = ReadDoc("protocol.md");
  const std::set<std::string> documented = DocumentedRoutes(ReadDoc("http-api.md"));
  std::set<std::string> routes;
  for (const Operation& row : kOperations) {
    for (std::string_view verb : BeanstalkCommandsOf(row)) {
      const std::string word = std::string(verb);
      bool listed = false;
      // In the list of beanstalkd's commands (a word of it), or a heading.
      for (size_t at = protocol.find(word); at != std::string::npos && !listed;
           at = protocol.find(word, at + 1)) {
        char before = at == 0 ? '\n' : protocol[at - 1];
        char after = at + word.size() < protocol.size() ? protocol[at + word.size()] : '\n';
        listed = (before == ' ' || before == '\n' || before == '`') &&
                 (after == ' ' || after == '\n' || after == '`' || after == ',');
      }
      EXPECT_TRUE(listed) << "docs/protocol.md does not name the command " << verb;
    }
    for (std::string_view spec : HttpRoutesOf(row)) {
      routes.insert(std::string(spec));
      EXPECT_TRUE(documented.contains(std::string(spec)))
          << "docs/http-api.md's table of routes does not name " << spec;
    }
  }
  for (const std::string& r : documented)
    EXPECT_TRUE(routes.contains(r)) << "docs/http-api.md names " << r << ", which no row serves";
}

// The fuzzers' dictionaries know every command and every literal segment
// of every route, so that fuzzing reaches each operation.
TEST(Operations, TheFuzzDictionariesNameEveryRow) {
  auto read = [](std::string_view name) {
    std::ifstream in(std::string(DELAYQ_SOURCE_DIR) + "/fuzz/" + std::string(name));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string bean = read("beanstalk_decoder.dict"), http = read("http_api.dict");
  ASSERT_FALSE(bean.empty());
  ASSERT_FALSE(http.empty());
  for (const Operation& row : kOperations) {
    for (std::string_view verb : BeanstalkCommandsOf(row))
      EXPECT_NE(bean.find("\"" + std::string(verb)), std::string::npos)
          << "fuzz/beanstalk_decoder.dict lacks " << verb;
    for (std::string_view spec : HttpRoutesOf(row)) {
      std::istringstream path(std::string(spec.substr(spec.find(' ') + 2)));
      for (std::string seg; std::getline(path, seg, '/');)
        if (!seg.starts_with('{'))
          EXPECT_NE(http.find("\"/" + seg), std::string::npos)
              << "fuzz/http_api.dict lacks /" << seg << " (" << spec << ")";
    }
  }
}

// docs/architecture.md's table of operations is made from the table:
// after changing a row, paste what this test prints.
TEST(Operations, ArchitectureDocHoldsTheTable) {
  const std::string doc = ReadDoc("architecture.md");
  const std::string want = OperationsMarkdownTable();
  std::istringstream in(doc);
  std::string got;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("| operation | beanstalkd |")) inside = true;
    if (inside && !line.starts_with("|")) break;
    if (inside) got += line + "\n";
  }
  EXPECT_EQ(got, want) << "docs/architecture.md's table of operations differs from "
                          "include/delayq/operations.h's; replace it with:\n\n"
                       << want;
}

}  // namespace
}  // namespace delayq::server
