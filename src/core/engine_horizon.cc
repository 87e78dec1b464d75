// Jobs loaded from the store, and the horizon (engine_impl.h;
// docs/storage.md, "The horizon"): Restore at start-up, Adopt of a cold job
// taken back into memory, each topic's mark, the counts of cold jobs, and
// the eviction of delayed jobs due beyond the mark.
#include <algorithm>

#include "core/engine_impl.h"
#include "delayq/text.h"

namespace delayq {

Status Engine::Impl::Restore(TimeMs now, const JobRecord& r, std::string_view body) {
  return Load(now, r, body, /*cold=*/false);
}

void Engine::Impl::SetTopicMark(std::string_view name, std::optional<DueMark> mark) {
  if (Topic* t = FindTopic(name)) t->mark = mark;
}

DueMark Engine::Impl::TopicMark(std::string_view name) const {
  const Topic* t = FindTopic(name);
  return t == nullptr ? DueMark{horizon_, kMaxId} : MarkOf(t);
}

uint64_t Engine::Impl::ColdJobs(std::string_view name) const {
  const Topic* t = FindTopic(name);
  return t == nullptr ? 0 : t->cold;
}

std::vector<std::string> Engine::Impl::TopicsWithColdJobs() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : topics_)
    if (t->cold > 0) out.emplace_back(name);
  return out;
}

uint64_t Engine::Impl::DelayedInMemory(std::string_view name) const {
  const Topic* t = FindTopic(name);
  return t == nullptr ? 0 : t->delayed;
}

Status Engine::Impl::AddColdJob(std::string_view name, uint64_t count) {
  if (!IsValidTopicName(name)) return Status::InvalidArgument("bad topic name");
  Topic* t = GetOrCreateTopic(name);
  t->cold += count;
  n_cold_ += count;
  return Finish(Status::Ok());
}

Status Engine::Impl::Adopt(TimeMs now, const JobRecord& r, std::string_view body) {
  return Load(now, r, body, /*cold=*/true);
}

void Engine::Impl::TakeEvicted(std::vector<ColdJob>* out) {
  out->insert(out->end(), std::make_move_iterator(evicted_.begin()),
              std::make_move_iterator(evicted_.end()));
  evicted_.clear();
}

bool Engine::Impl::HasKey(std::string_view name, std::string_view key) const {
  const Topic* t = FindTopic(name);
  return t != nullptr && !key.empty() && t->keys.count(key) > 0;
}

JobId Engine::Impl::ResolveName(std::string_view name) const {
  if (auto n = names_.find(name); n != names_.end()) return n->second->id;
  JobId id = ParseDecimalId(name);
  const Job* j = id == 0 ? nullptr : ids_.Find(id);
  return j != nullptr && !j->named ? id : 0;
}

bool Engine::Impl::NoteDelayed(const Job* j) {
  if (!opt_.evict_beyond_horizon || MarkOfJob(j) <= MarkOf(j->topic)) return false;
  to_evict_.push_back(j->id);
  return true;
}

void Engine::Impl::EvictBeyondHorizon() {
  for (JobId id : to_evict_) {
    Job* j = ids_.Find(id);
    if (j == nullptr || j->state != JobState::kDelayed || MarkOfJob(j) <= MarkOf(j->topic))
      continue;
    evicted_.push_back(ColdJob{ToRecord(j), std::string(j->body())});
    Unplace(j);
    Topic* t = j->topic;
    if (j->key_size > 0) t->keys.erase(j->key());
    if (j->named) names_.erase(j->key());
    Free(j);
    t->cold++;
    n_cold_++;
  }
  to_evict_.clear();
}

Status Engine::Impl::Load(TimeMs now, const JobRecord& r, std::string_view body, bool cold) {
  AdvanceTo(now);
  if (r.id == 0 || ids_.Find(r.id) != nullptr) return Status::InvalidArgument("duplicate job id");
  if (r.state == JobState::kReserved) return Status::InvalidArgument("reserved state stored");
  if (!IsValidTopicName(r.topic)) return Status::InvalidArgument("bad topic name");
  if (r.key.size() > kMaxKeyLength) return Status::InvalidArgument("key too long");
  if (r.ttr_ms < 1 || r.ttr_ms > kMaxDelayMs) return Status::InvalidArgument("ttr out of range");
  if (r.due_ms < 0 || r.due_ms > MaxRecordMs() || r.created_ms < 0 || r.created_ms > MaxRecordMs())
    return Status::InvalidArgument("time out of range");
  if (Status st = ValidateBackoff(r.backoff); !st.ok()) return st;
  Topic* t = GetOrCreateTopic(r.topic);
  if (!r.key.empty() && t->keys.count(r.key) > 0) {
    MaybeDrop(t);
    Finish();
    return Status::InvalidArgument("duplicate key");
  }
  if (r.named && (r.key.empty() || names_.count(r.key) > 0)) {
    MaybeDrop(t);
    Finish();
    return Status::InvalidArgument(r.key.empty() ? "a name without a key" : "duplicate name");
  }
  Job* j = pool_.Create(r.key, body);
  j->id = r.id;
  j->topic = t;
  j->created = Ticks(r.created_ms);
  j->priority = r.priority;
  j->ttr = r.ttr_ms;
  j->delay = r.delay_ms;
  j->reserves = r.reserves;
  j->timeouts = r.timeouts;
  j->releases = r.releases;
  j->buries = r.buries;
  j->kicks = r.kicks;
  j->max_tries = r.max_tries;
  j->backoff = Intern(r.backoff);
  j->due = Ticks(r.due_ms);
  if (r.answer) SetAnswer(j, *r.answer);
  ids_.Insert(j);
  job_bytes_ += sizeof(Job) + j->key_size + j->body_size;
  if (!r.key.empty()) t->keys.emplace(j->key(), j);
  j->named = r.named;
  if (r.named) names_.emplace(j->key(), j);
  next_id_ = std::max(next_id_, r.id + 1);
  JobState st = r.state;
  if (st == JobState::kDelayed && j->due <= now_) st = JobState::kReady;
  Place(j, st);
  if (cold && t->cold > 0) {
    t->cold--;
    n_cold_--;
  }
  return Finish(Status::Ok());
}

}  // namespace delayq
