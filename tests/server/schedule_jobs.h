// The jobs recurring schedules put into a topic, as the black-box tests of
// schedules read them from a running delayqd (schedule_test.cc,
// schedule_config_test.cc): each firing's job carries the key
// <schedule>@<fire time in ms> (docs/schedules.md, "Exactly once").
//
// Thread: the test's.
#ifndef DELAYQ_TESTS_SERVER_SCHEDULE_JOBS_H_
#define DELAYQ_TESTS_SERVER_SCHEDULE_JOBS_H_

#include <rapidjson/document.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "delayq/types.h"
#include "server/http_client.h"

namespace delayq::testing {

// A job a schedule put, as GET /topics/{topic}/jobs lists it.
struct Fired {
  std::string key;
  TimeMs fire_ms = 0;     // from its key: <schedule>@<fire ms>
  TimeMs created_ms = 0;  // when the put was made
};

// The ready and delayed jobs of `topic` on the delayqd whose HTTP port is
// `port` (the first 1,000 of each), by fire time.
inline std::vector<Fired> JobsOf(uint16_t port, const std::string& topic) {
  HttpClient c(port);
  std::vector<Fired> out;
  for (const char* state : {"ready", "delayed"}) {
    HttpResponse r =
        c.Call("GET", "/topics/" + topic + "/jobs?state=" + std::string(state) + "&limit=1000");
    if (r.status != 200) continue;
    rapidjson::Document d = Json(r.body);
    for (const auto& j : d["jobs"].GetArray()) {
      Fired f;
      f.key = j["key"].GetString();
      f.fire_ms = std::stoll(f.key.substr(f.key.rfind('@') + 1));
      f.created_ms = j["created_ms"].GetInt64();
      out.push_back(f);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Fired& a, const Fired& b) { return a.fire_ms < b.fire_ms; });
  return out;
}

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_SCHEDULE_JOBS_H_
