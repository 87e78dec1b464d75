// Looking at the engine without changing a job (engine_impl.h): peeks,
// stats, the list of topics, the memory used, and the check of the
// invariants that tests run after every call.
#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <unordered_map>

#include "core/engine_impl.h"

namespace delayq {

Result<JobView> Engine::Impl::Peek(TimeMs now, JobId id) {
  AdvanceTo(now);
  Finish();
  Job* j = ids_.Find(id);
  if (j == nullptr) return Status::NotFound();
  return View(j);
}

Result<JobView> Engine::Impl::PeekReservation(TimeMs now, JobId id) {
  // The texts of this streak of PeekReservation calls stay (a deque moved
  // keeps its elements in place); any other call drops them (AdvanceTo).
  std::deque<std::string> texts = std::move(lease_texts_);
  AdvanceTo(now);
  Finish();
  lease_texts_ = std::move(texts);
  Job* j = ids_.Find(id);
  if (j == nullptr || j->state != JobState::kReserved) return Status::NotFound();
  JobView v = View(j);
  if (j->reserver == nullptr) {
    v.lease = lease_texts_.emplace_back(FormatLease(j->lease));
  }
  return v;
}

Result<JobView> Engine::Impl::PeekByKey(TimeMs now, std::string_view topic, std::string_view key) {
  AdvanceTo(now);
  Finish();
  Topic* t = FindTopic(topic);
  if (t == nullptr) return Status::NotFound();
  auto it = t->keys.find(key);
  if (key.empty() || it == t->keys.end()) return Status::NotFound();
  return View(it->second);
}

Result<JobView> Engine::Impl::PeekReady(TimeMs now, std::string_view topic) {
  AdvanceTo(now);
  Finish();
  Topic* t = FindTopic(topic);
  if (t == nullptr || t->ready.empty()) return Status::NotFound();
  return View(t->ready.top());
}

Result<JobView> Engine::Impl::PeekDelayed(TimeMs now, std::string_view topic) {
  AdvanceTo(now);
  Finish();
  Topic* t = FindTopic(topic);
  if (t == nullptr || t->delayed == 0) return Status::NotFound();
  std::vector<Job*> first = DelayedInOrder(t, 1);
  if (first.empty()) return Status::Internal("delayed count out of step with the wheel");
  return View(first.front());
}

Result<JobView> Engine::Impl::PeekBuried(TimeMs now, std::string_view topic) {
  AdvanceTo(now);
  Finish();
  Topic* t = FindTopic(topic);
  if (t == nullptr || t->buried.empty()) return Status::NotFound();
  return View(Job::From(t->buried.next));
}

std::vector<JobView> Engine::Impl::ListJobs(TimeMs now, const ListJobsRequest& r, bool* more) {
  AdvanceTo(now);
  Finish();
  *more = false;
  std::vector<JobView> out;
  Topic* t = FindTopic(r.topic);
  if (t == nullptr || r.limit == 0) return out;
  // The limit + 1 first ids after the cursor (one more tells that more
  // follow): candidates are gathered, and cut back to those whenever they
  // reach twice as many (nth_element: linear), so the work is
  // O(n log limit) at worst and the memory O(limit).
  const size_t keep = size_t{r.limit} + 1;
  auto before = [desc = r.desc](const Job* a, const Job* b) {
    return desc ? a->id > b->id : a->id < b->id;
  };
  std::vector<Job*> picked;
  auto consider = [&](Job* j) {
    if (r.after != 0 && (r.desc ? j->id >= r.after : j->id <= r.after)) return;
    picked.push_back(j);
    if (picked.size() >= 2 * keep) {
      std::nth_element(picked.begin(), picked.begin() + keep - 1, picked.end(), before);
      picked.resize(keep);
    }
  };
  auto walk = [&](Link& list) {
    for (Link* l = list.next; l != &list; l = l->next) consider(Job::From(l));
  };
  switch (r.state) {
    case JobState::kReady:
      for (Job* j : t->ready.jobs()) consider(j);
      break;
    case JobState::kDelayed:
      walk(t->delayed_jobs);
      break;
    case JobState::kReserved:
      walk(t->reserved_jobs);
      break;
    case JobState::kBuried:
      walk(t->buried);
      break;
  }
  std::sort(picked.begin(), picked.end(), before);
  if (picked.size() > r.limit) {
    *more = true;
    picked.resize(r.limit);
  }
  out.reserve(picked.size());
  for (const Job* j : picked) out.push_back(View(j));
  return out;
}

std::vector<JobView> Engine::Impl::FindKey(TimeMs now, std::string_view key) {
  AdvanceTo(now);
  Finish();
  std::vector<const Topic*> ts;
  for (const auto& [name, t] : topics_)
    if (t->keys.count(key) > 0) ts.push_back(t.get());
  std::sort(ts.begin(), ts.end(), [](const Topic* a, const Topic* b) { return a->seq < b->seq; });
  std::vector<JobView> out;
  if (key.empty()) return out;
  for (const Topic* t : ts) out.push_back(View(t->keys.find(key)->second));
  return out;
}

Result<JobStats> Engine::Impl::StatsJob(TimeMs now, JobId id) {
  AdvanceTo(now);
  Finish();
  Job* j = ids_.Find(id);
  if (j == nullptr) return Status::NotFound();
  JobStats st;
  st.id = j->id;
  st.topic = j->topic->name;
  st.key = std::string(j->key());
  st.state = j->state;
  st.priority = j->priority;
  CopyFigures(j, &st);
  st.age_ms = FloorMs(now_ - j->created);
  st.due_ms = DueOut(j);
  bool timed = j->state == JobState::kDelayed || j->state == JobState::kReserved;
  st.time_left_ms = timed ? CeilMs(std::max<TimeMs>(0, j->due - now_)) : 0;
  st.body_size = j->body_size;
  return st;
}

Result<TopicStats> Engine::Impl::StatsTopic(TimeMs now, std::string_view name) {
  AdvanceTo(now);
  Finish();
  Topic* t = FindTopic(name);
  if (t == nullptr) return Status::NotFound();
  return StatsOf(*t);
}

TopicStats Engine::Impl::StatsOf(const Topic& t) const {
  TopicStats st;
  st.name = t.name;
  st.urgent = t.urgent;
  st.ready = t.ready.size();
  st.reserved = t.reserved;
  st.delayed = t.delayed + t.cold;
  st.buried = t.buried_count;
  st.total_jobs = t.total_jobs;
  st.using_count = t.using_count;
  st.watching = t.watching;
  st.waiting = t.waiting;
  st.cmd_delete = t.cmd_delete;
  st.cmd_pause = t.cmd_pause;
  st.pause_ms = t.pause_ms;
  st.pause_time_left_ms = t.paused(now_) ? CeilMs(t.paused_until - now_) : 0;
  return st;
}

EngineStats Engine::Impl::Stats(TimeMs now) {
  AdvanceTo(now);
  Finish();
  EngineStats st;
  st.urgent = n_urgent_;
  st.ready = n_ready_;
  st.reserved = n_reserved_;
  st.delayed = n_delayed_ + n_cold_;
  st.buried = n_buried_;
  st.total_jobs = total_jobs_;
  st.job_timeouts = job_timeouts_;
  st.topics = topics_.size();
  st.sessions = sessions_.size();
  st.waiting = waiting_sessions_;
  st.next_id = next_id_;
  return st;
}

std::vector<std::string> Engine::Impl::ListTopics(TimeMs now) {
  std::vector<std::string> out;
  for (const Topic* t : TopicsInOrder(now)) out.push_back(t->name);
  return out;
}

std::vector<TopicStats> Engine::Impl::TopicsStats(TimeMs now) {
  std::vector<TopicStats> out;
  const std::vector<const Topic*> ts = TopicsInOrder(now);
  out.reserve(ts.size());
  for (const Topic* t : ts) out.push_back(StatsOf(*t));
  return out;
}

std::vector<const Topic*> Engine::Impl::TopicsInOrder(TimeMs now) {
  AdvanceTo(now);
  Finish();
  std::vector<const Topic*> ts;
  ts.reserve(topics_.size());
  for (const auto& [name, t] : topics_) ts.push_back(t.get());
  std::sort(ts.begin(), ts.end(), [](const Topic* a, const Topic* b) { return a->seq < b->seq; });
  return ts;
}

size_t Engine::Impl::MemoryUsage() const {
  size_t n = job_bytes_ + ids_.MemoryUsage() + wheel_.MemoryUsage();
  for (const auto& [name, t] : topics_)
    n += sizeof(Topic) + t->name.size() + t->ready.MemoryUsage() +
         t->keys.size() * (sizeof(void*) * 4);
  return n + names_.size() * (sizeof(void*) * 4);
}

JobView Engine::Impl::View(const Job* j) const {
  JobView v;
  v.id = j->id;
  v.topic = j->topic->name;
  v.key = j->key();
  v.body = j->body();
  v.state = j->state;
  v.priority = j->priority;
  v.due_ms = DueOut(j);
  v.named = j->named;
  v.own_backoff = j->backoff != 0;
  CopyFigures(j, &v);
  if (!answers_.empty()) {
    if (auto it = answers_.find(j->id); it != answers_.end()) {
      v.answered = true;
      v.answer_status = it->second.status;
      v.answer_text = it->second.text;
    }
  }
  return v;
}

std::string Engine::Impl::CheckInvariants() const {
  auto fail = [](std::string what) { return what; };
  if (!wheel_.Valid()) return fail("timing wheel placement");
  for (const auto& [id, a] : answers_) {
    if (ids_.Find(id) == nullptr) return fail("an answer kept for no job");
    if (a.text.size() > kMaxAnswerBytes) return fail("an answer too long");
  }
  uint64_t ready = 0, urgent = 0, reserved = 0, delayed = 0, buried = 0, named = 0;
  std::unordered_map<const Topic*, std::array<uint64_t, 5>> per;
  std::string err;
  ids_.ForEach([&](Job* j) {
    auto& c = per[j->topic];
    if (j->named) named++;
    switch (j->state) {
      case JobState::kReady:
        ready++;
        c[0]++;
        if (j->priority < kUrgentPriority) urgent++, c[4]++;
        if (j->pos >= j->topic->ready.size() || j->topic->ready.jobs()[j->pos] != j)
          err = "ready job not at its heap position";
        break;
      case JobState::kReserved:
        reserved++;
        c[1]++;
        if (j->reserver != nullptr &&
            (j->pos >= j->reserver->reserved.size() || j->reserver->reserved[j->pos] != j))
          err = "reserved job not in its session's list";
        break;
      case JobState::kDelayed:
        delayed++;
        c[2]++;
        if (j->due <= now_) err = "delayed job past its due time";
        break;
      case JobState::kBuried:
        buried++;
        c[3]++;
        break;
    }
    if (j->key_size > 0) {
      auto it = j->topic->keys.find(j->key());
      if (it == j->topic->keys.end() || it->second != j) err = "key index out of step";
    }
    if (j->named) {
      auto it = names_.find(j->key());
      if (it == names_.end() || it->second != j) err = "name index out of step";
    }
    if (topics_.count(std::string_view(j->topic->name)) == 0) err = "job in a dropped topic";
  });
  if (!err.empty()) return err;
  if (named != names_.size()) return fail("names of jobs that are gone");
  if (ready != n_ready_ || urgent != n_urgent_ || reserved != n_reserved_ ||
      delayed != n_delayed_ || buried != n_buried_)
    return fail("global counters");
  if (wheel_.size() != delayed + reserved) return fail("wheel size");
  uint64_t cold = 0;
  for (const auto& [name, t] : topics_) cold += t->cold;
  if (cold != n_cold_) return fail("cold job count");
  for (const auto& [name, t] : topics_) {
    auto c = per[t.get()];
    if (!t->ready.Valid()) return fail("ready heap of " + t->name);
    if (t->ready.size() != c[0] || t->reserved != c[1] || t->delayed != c[2] ||
        t->buried_count != c[3] || t->urgent != c[4])
      return fail("counters of topic " + t->name);
    uint64_t nb = 0;
    for (const Link* l = t->buried.next; l != &t->buried; l = l->next) {
      nb++;
      if (Job::From(const_cast<Link*>(l))->state != JobState::kBuried)
        return fail("non-buried job in buried list");
    }
    if (nb != t->buried_count) return fail("buried list length of " + t->name);
    for (auto [list, state, count] :
         {std::tuple(&t->delayed_jobs, JobState::kDelayed, t->delayed),
          std::tuple(&t->reserved_jobs, JobState::kReserved, t->reserved)}) {
      uint64_t n = 0;
      for (const Link* l = list->next; l != list; l = l->next, ++n) {
        const Job* j = Job::From(const_cast<Link*>(l));
        if (j->state != state || j->topic != t.get())
          return fail("a job out of place in the " + std::string(JobStateName(state)) +
                      " list of " + t->name);
      }
      if (n != count) return fail(std::string(JobStateName(state)) + " list length of " + t->name);
    }
    if (t->refs() == 0 && t.get() != default_topic_) return fail("unreferenced topic " + t->name);
    if (t->waiting > 0 && !t->ready.empty() && !t->paused(now_))
      return fail("topic " + t->name + " has a ready job and a waiting session");
    uint64_t using_count = 0, watching = 0, waiting = 0;
    for (const auto& [id, s] : sessions_) {
      using_count += s->used == t.get();
      watching += std::count(s->watched.begin(), s->watched.end(), t.get());
      waiting += std::count(s->wait_topics.begin(), s->wait_topics.end(), t.get());
    }
    if (using_count != t->using_count || watching != t->watching || waiting != t->waiting)
      return fail("session references of topic " + t->name);
  }
  uint64_t waiting_sessions = 0;
  for (const auto& [id, s] : sessions_) {
    if (s->waiting) {
      waiting_sessions++;
      if (s->wait_topics.empty()) return fail("waiting session without topics");
    } else if (!s->wait_topics.empty()) {
      return fail("idle session with wait topics");
    }
    if (s->waiting && s->wake_at == kNever && s->wait_deadline != kNever)
      return fail("waiting session without a wake time");
    for (const Job* j : s->reserved)
      if (j->state != JobState::kReserved || j->reserver != s.get())
        return fail("session holds a job it did not reserve");
  }
  if (waiting_sessions != waiting_sessions_) return fail("waiting session count");
  return {};
}

}  // namespace delayq
