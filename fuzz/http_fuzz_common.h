// What the HTTP fuzz targets share: a failed check aborts (libFuzzer then
// keeps the input), a manual clock, and the checks of one API reply.
#ifndef DELAYQ_FUZZ_HTTP_FUZZ_COMMON_H_
#define DELAYQ_FUZZ_HTTP_FUZZ_COMMON_H_

#include <rapidjson/document.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "fuzz_check.h"
#include "manual_clock.h"
#include "server/http_api.h"
#include "server/prometheus_text.h"

namespace {

using namespace delayq;

using delayq::testing::ManualClock;

const std::set<int> kStatuses = {200, 201, 400, 404, 405, 409, 413, 503};
const std::set<std::string> kCodes = {
    "bad_json", "invalid_argument", "bad_request", "not_found",   "method_not_allowed",
    "conflict", "job_too_big",      "draining",    "unavailable", "lease_lost"};
// And those of the access checks (docs/security.md), for a caller that
// is not trusted.
const std::set<int> kAccessStatuses = {401, 403, 429};
const std::set<std::string> kAccessCodes = {"unauthenticated", "forbidden", "rate_limited"};

// `access`: the caller may be refused by the access checks.
[[maybe_unused]] void CheckReply(const server::HttpReply& r, bool access = false) {
  FUZZ_CHECK(kStatuses.count(r.status) == 1 || (access && kAccessStatuses.count(r.status) == 1),
             r.body.c_str());
  if (r.content_type.starts_with("text/html") || r.content_type.starts_with("text/css") ||
      r.content_type.starts_with("text/javascript")) {
    // GET /ui/...: the dashboard's files, as they are built in.
    FUZZ_CHECK(r.status == 200 && !r.body.empty(), "a dashboard file");
    return;
  }
  if (r.content_type != server::kJsonContentType) {
    // GET /metrics: the Prometheus text format, lines that each end in a
    // newline, comments or `name{labels} value`.
    FUZZ_CHECK(r.content_type == server::kPrometheusContentType && r.status == 200, r.body.c_str());
    FUZZ_CHECK(!r.body.empty() && r.body.back() == '\n', r.body.c_str());
    for (size_t at = 0; at < r.body.size(); at = r.body.find('\n', at) + 1) {
      const char c = r.body[at];
      FUZZ_CHECK(c == '#' || c == '_' || (c >= 'a' && c <= 'z'), r.body.c_str());
    }
    return;
  }
  rapidjson::Document d;
  d.Parse(r.body.c_str(), r.body.size());
  FUZZ_CHECK(!d.HasParseError() && d.IsObject(), r.body.c_str());
  if (r.status >= 400) {
    FUZZ_CHECK(d.HasMember("error") && d["error"].IsObject(), r.body.c_str());
    const auto& e = d["error"];
    FUZZ_CHECK(e.HasMember("code") && e["code"].IsString() && e.HasMember("message") &&
                   e["message"].IsString(),
               r.body.c_str());
    FUZZ_CHECK(kCodes.count(e["code"].GetString()) == 1 ||
                   (access && kAccessCodes.count(e["code"].GetString()) == 1),
               r.body.c_str());
  }
  FUZZ_CHECK((r.status == 405) == !r.allow.empty(), r.body.c_str());
}

}  // namespace

#endif  // DELAYQ_FUZZ_HTTP_FUZZ_COMMON_H_
