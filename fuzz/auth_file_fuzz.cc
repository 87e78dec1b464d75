// libFuzzer target for the token file (app/auth_file.h) and the list of
// trusted networks (server/access.h).
//
// The whole input is a token file's text; its first line is also tried as
// a --trusted-networks value. Checks:
//  - ParseAuthFile either fails with a message that names the source, or
//    gives tokens; AccessPolicy::Make either refuses them or finds each by
//    its digest;
//  - every token of a policy written back as its file entry
//    (TokenFileEntry) reads back as the same token;
//  - a network list that parses is written (ToString) as a list that
//    parses to the same text.
#include <cstdint>
#include <string>
#include <string_view>

#include "app/auth_file.h"
#include "fuzz_check.h"

using namespace delayq;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tokens = app::ParseAuthFile(text, "fuzz.toml");
  if (!tokens.ok()) {
    FUZZ_CHECK(tokens.status().message().rfind("fuzz.toml", 0) == 0,
               "an error that does not name the file");
  } else {
    auto policy = server::AccessPolicy::Make(*tokens, {});
    if (policy.ok()) {
      for (const Token& t : (*policy)->tokens()) {
        FUZZ_CHECK((*policy)->Find(t.sha256) == &t, "a token not found by its digest");
        auto back = app::ParseAuthFile(TokenFileEntry(t), "entry");
        FUZZ_CHECK(back.ok() && back->size() == 1, "a token's entry does not read back");
        const Token& b = back->front();
        FUZZ_CHECK(b.name == t.name && b.sha256 == t.sha256 && b.topics == t.topics &&
                       b.rights == t.rights,
                   "a token's entry reads back as another token");
        FUZZ_CHECK(b.rate == t.rate && b.burst == t.burst, "a token's rate reads back otherwise");
      }
    }
  }
  std::string_view first = text.substr(0, text.find('\n'));
  auto nets = server::Networks::Parse(first);
  if (nets.ok()) {
    const std::string shown = nets->ToString();
    auto again = server::Networks::Parse(shown);
    FUZZ_CHECK(again.ok() && again->ToString() == shown, "a network list does not read back");
  }
  return 0;
}
