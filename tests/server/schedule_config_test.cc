// Schedules from delayqd's config file ([schedule."name"] tables,
// docs/configuration.md and docs/schedules.md): a real build/delayqd
// started with a file that holds them puts their jobs; a restart with the
// same file stores nothing again (the schedule keeps its @every anchor, a
// firing is never made twice); a bad table stops the start, naming the
// schedule; schedules a Redis away at the start could not take are stored
// once it answers.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "delayq/types.h"
#include "server/delayqd_fixture.h"
#include "server/schedule_jobs.h"
#include "temp_dir.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

// The fire times of the jobs schedules put into `topic` (ready or delayed),
// in order.
std::vector<TimeMs> ConfiguredFireTimes(uint16_t port, const std::string& topic) {
  std::vector<TimeMs> out;
  for (const Fired& f : JobsOf(port, topic)) out.push_back(f.fire_ms);
  return out;
}

// Two schedules, one every second by @every, one every second by a cron
// expression with a seconds field.
constexpr const char* kTwoSchedules =
    "[schedule.tick]\n"
    "cron = \"@every 1s\"\n"
    "topic = \"ticks\"\n"
    "missed = \"one\"\n"
    "[schedule.tick.job]\n"
    "body = \"tick\"\n"
    "priority = 7\n"
    "\n"
    "[schedule.\"every-second\"]\n"
    "cron = \"* * * * * *\"\n"
    "tz = \"Europe/Berlin\"\n"
    "topic = \"seconds\"\n"
    "job = { body = \"second\", ttr_ms = 5000 }\n";

class ScheduleConfig : public DelayqdFixture {
 protected:
  // Writes `toml` to the config file and starts delayqd on it, its data in
  // data_ (kept across restarts).
  void StartWith(const std::string& toml) {
    std::ofstream(config_) << toml;
    StartServer({"-c", config_, "-b", data_.path()});
  }
  // Waits up to 10 s until `topic` holds `n` jobs of firings; their fire
  // times.
  std::vector<TimeMs> WaitFirings(const std::string& topic, size_t n) {
    std::vector<TimeMs> fired;
    for (auto end = std::chrono::steady_clock::now() + 10s;
         fired.size() < n && std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(20ms))
      fired = ConfiguredFireTimes(http_port_, topic);
    return fired;
  }
  TimeMs AnchorOf(const std::string& name) {
    HttpResponse r = Call("GET", "/schedules/" + name);
    rapidjson::Document d = Json(r.body);
    if (r.status != 200 || !d.IsObject() || !d.HasMember("anchor_ms")) {
      ADD_FAILURE() << r.status << " " << r.body;
      return -1;
    }
    return d["anchor_ms"].GetInt64();
  }

  TempDir data_;
  TempDir dir_;
  std::string config_ = dir_.path() + "/delayqd.toml";
};

// Both schedules of the file are stored as their PUTs would store them and
// put their jobs, each in its topic.
TEST_F(ScheduleConfig, TheFilesSchedulesPutTheirJobs) {
  ASSERT_NO_FATAL_FAILURE(StartWith(kTwoSchedules));
  EXPECT_GE(WaitFirings("ticks", 2).size(), 2u) << server_.Log();
  EXPECT_GE(WaitFirings("seconds", 2).size(), 2u) << server_.Log();
  HttpResponse r = Call("GET", "/schedules/tick");
  ASSERT_EQ(r.status, 200) << r.body;
  rapidjson::Document d = Json(r.body);
  EXPECT_STREQ(d["cron"].GetString(), "@every 1s");
  EXPECT_STREQ(d["missed"].GetString(), "one");
  EXPECT_EQ(d["job"]["priority"].GetInt(), 7);
  r = Call("GET", "/schedules/every-second");
  ASSERT_EQ(r.status, 200) << r.body;
  d = Json(r.body);
  EXPECT_STREQ(d["tz"].GetString(), "Europe/Berlin");
  EXPECT_EQ(d["job"]["ttr_ms"].GetInt64(), 5000);
  // A job of the first: its body and priority are the file's.
  HttpResponse job = Call("POST", "/topics/ticks/reserve", "{}");
  ASSERT_EQ(job.status, 200) << job.body;
  rapidjson::Document j = Json(job.body);
  ASSERT_EQ(j["jobs"].Size(), 1u) << job.body;
  EXPECT_STREQ(j["jobs"][0]["body"].GetString(), "tick");
  EXPECT_EQ(j["jobs"][0]["priority"].GetInt(), 7);
}

// A restart with the same file writes nothing (the log says the schedules
// are unchanged), keeps the anchor @every counts from, and makes no firing
// twice: the jobs of the first run are deleted before the restart, and the
// missed firing `missed: one` makes after it is a later one.
TEST_F(ScheduleConfig, ARestartWithTheSameFileMovesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartWith(kTwoSchedules));
  EXPECT_NE(server_.Log().find("event=schedule_configured schedule=\"tick\" stored=new"),
            std::string::npos)
      << server_.Log();
  std::vector<TimeMs> first = WaitFirings("ticks", 2);
  ASSERT_GE(first.size(), 2u) << server_.Log();
  const TimeMs anchor = AnchorOf("tick");
  // (A firing made between the list and the clear is later than
  // last_made: the check below stays true of it.)
  const TimeMs last_made = first.back();
  ASSERT_EQ(Call("POST", "/topics/ticks/clear", "{}").status, 200);
  ASSERT_EQ(server_.Stop(), 0) << server_.Log();

  ASSERT_NO_FATAL_FAILURE(StartWith(kTwoSchedules));
  std::vector<TimeMs> second;
  for (auto end = std::chrono::steady_clock::now() + 10s;
       second.size() < 2 && std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(20ms))
    second = ConfiguredFireTimes(http_port_, "ticks");
  ASSERT_GE(second.size(), 2u) << server_.Log();
  const std::string log = server_.Log();
  EXPECT_NE(log.find("event=schedule_configured schedule=\"tick\" stored=unchanged"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("event=schedule_configured schedule=\"every-second\" stored=unchanged"),
            std::string::npos)
      << log;
  EXPECT_EQ(AnchorOf("tick"), anchor);
  std::set<TimeMs> distinct(second.begin(), second.end());
  EXPECT_EQ(distinct.size(), second.size());
  for (TimeMs t : second) {
    EXPECT_GT(t, last_made) << "the firing of " << t << " was made in the first run already";
    EXPECT_EQ((t - anchor) % 1000, 0) << t << ": not a whole number of seconds from the anchor";
  }
}

// Redis away when delayqd starts: the file's schedules cannot be stored
// then (the log says why), and are stored once Redis answers, without a
// restart; their jobs follow.
TEST_F(ScheduleConfig, SchedulesWaitForARedisAwayAtTheStart) {
  std::string error;
  ASSERT_TRUE(redis_.Start(&error)) << error;  // takes a port and a directory
  const std::string url = redis_.url();
  redis_.Stop();
  std::ofstream(config_) << kTwoSchedules;
  // (delayqd waits 5 s for Redis, then serves without it.)
  ASSERT_TRUE(server_.Start(DelayqdPath(), {"-c", config_, "--backend", url}, &error)) << error;
  http_port_ = HttpPortOf(server_);
  ASSERT_NE(http_port_, 0) << server_.Log();
  auto logged = [&](const std::string& line) {
    for (auto end = std::chrono::steady_clock::now() + 15s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(50ms))
      if (server_.Log().find(line) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(logged("event=schedule_failed schedule=\"tick\" code=unavailable")) << server_.Log();
  EXPECT_EQ(server_.Log().find("event=schedule_configured"), std::string::npos) << server_.Log();

  ASSERT_TRUE(redis_.Start(&error)) << error;  // the same port
  EXPECT_TRUE(logged("event=schedule_configured schedule=\"tick\" stored=new")) << server_.Log();
  EXPECT_TRUE(logged("event=schedule_configured schedule=\"every-second\" stored=new"))
      << server_.Log();
  EXPECT_GE(WaitFirings("ticks", 2).size(), 2u) << server_.Log();
  EXPECT_GE(WaitFirings("seconds", 2).size(), 2u) << server_.Log();
}

// A table that changes a schedule replaces it at the next start, keeping its
// anchor as a PUT would; one that is bad stops the start with the
// schedule's name and what is wrong.
TEST_F(ScheduleConfig, AChangedTableReplacesABadOneStopsTheStart) {
  ASSERT_NO_FATAL_FAILURE(StartWith(kTwoSchedules));
  ASSERT_GE(WaitFirings("ticks", 1).size(), 1u) << server_.Log();
  const TimeMs anchor = AnchorOf("tick");
  ASSERT_EQ(server_.Stop(), 0) << server_.Log();
  std::string changed = kTwoSchedules;
  changed.replace(changed.find("priority = 7"), 12, "priority = 8");
  ASSERT_NO_FATAL_FAILURE(StartWith(changed));
  ASSERT_GE(WaitFirings("ticks", 1).size(), 1u) << server_.Log();
  EXPECT_NE(server_.Log().find("event=schedule_configured schedule=\"tick\" stored=replaced"),
            std::string::npos)
      << server_.Log();
  EXPECT_EQ(AnchorOf("tick"), anchor);
  EXPECT_EQ(Json(Call("GET", "/schedules/tick").body)["job"]["priority"].GetInt(), 8);
  ASSERT_EQ(server_.Stop(), 0) << server_.Log();

  struct Bad {
    std::string toml, message;
  };
  const std::vector<Bad> bad = {
      {"[schedule.late]\ncron = \"0 25 * * *\"\ntopic = \"t\"\njob = { body = \"x\" }\n",
       "event=bad_schedule schedule=\"late\" error=\"hour: 25 is out of range 0..23\""},
      {"[schedule.\"a b\"]\ncron = \"@daily\"\ntopic = \"t\"\njob = { body = \"x\" }\n",
       "event=bad_schedule schedule=\"a b\" error=\"a schedule name is 1 to 150 bytes"},
      {"[schedule.notopic]\ncron = \"@daily\"\njob = { body = \"x\" }\n",
       "event=bad_schedule schedule=\"notopic\" error=\"'topic' is required\""},
      {"[schedule.zone]\ncron = \"@daily\"\ntz = \"../../etc/passwd\"\ntopic = \"t\"\n"
       "job = { body = \"x\" }\n",
       "event=bad_schedule schedule=\"zone\""},
      {"[schedule.colour]\ncron = \"@daily\"\ntopic = \"t\"\ncolour = \"red\"\n"
       "job = { body = \"x\" }\n",
       "event=bad_schedule schedule=\"colour\""},
      {"[schedule.keyed]\ncron = \"@daily\"\ntopic = \"t\"\njob = { body = \"x\", key = \"k\" }\n",
       "event=bad_schedule schedule=\"keyed\" error=\"job: a schedule's job takes no key"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.toml);
    std::ofstream(config_) << b.toml;
    ServerProcess refused;
    std::string error;
    EXPECT_FALSE(refused.Start(DelayqdPath(), {"-c", config_, "-b", data_.path()}, &error, 5000ms));
    EXPECT_NE(refused.Log().find(b.message), std::string::npos) << refused.Log();
  }
}

}  // namespace
}  // namespace delayq::testing
