// The Local backend's horizon (local_backend.h; docs/storage.md, "The
// horizon"): delayed jobs due beyond now + horizon are kept on disk only
// ("cold"). The loader (LoadHorizon, on its timer) moves each topic's cold
// jobs into the engine ahead of their time, a bounded batch per loop turn;
// an operation that names a cold job by id, key or name takes it into
// memory first (WarmId, WarmKey, WarmName). Jobs the engine let go of
// whose writes are still on their way are looked up before the store
// (cold_pending_), until their batch is written (ForgetWritten).
#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <limits>

#include "backend/local_backend.h"
#include "delayq/text.h"
#include "store/record_codec.h"

namespace delayq::backend {

void LocalBackend::ForgetWritten(uint64_t seq) {
  while (!pending_order_.empty() && pending_order_.front().first <= seq) {
    auto [written, id] = pending_order_.front();
    pending_order_.pop_front();
    if (auto d = deleting_.find(id); d != deleting_.end() && d->second == written)
      deleting_.erase(d);
    auto c = cold_pending_.find(id);
    if (c == cold_pending_.end() || c->second.seq != written) continue;
    const JobRecord& r = c->second.job.record;
    if (!r.key.empty()) {
      auto k = cold_pending_keys_.find(store::UserKey(r.topic, r.key));
      if (k != cold_pending_keys_.end() && k->second == id) cold_pending_keys_.erase(k);
      if (r.named) {
        k = cold_pending_keys_.find(store::NameKey(r.key));
        if (k != cold_pending_keys_.end() && k->second == id) cold_pending_keys_.erase(k);
      }
    }
    cold_pending_.erase(c);
  }
}

Status LocalBackend::AdoptStored(JobId id) {
  JobRecord r;
  std::string body;
  Status st = store_->GetJob(id, &r, &body);
  if (!st.ok()) return st;
  if (r.state != JobState::kDelayed)
    return Status::Internal("job " + std::to_string(id) + " is stored " +
                            std::string(JobStateName(r.state)) + " but is not in memory");
  return engine_.Adopt(engine_.now(), r, body);
}

Status LocalBackend::WarmId(JobId id) {
  if (!horizon_on() || engine_.ColdJobs() == 0 || engine_.HasJob(id) || deleting_.count(id) > 0)
    return Status::Ok();
  if (auto c = cold_pending_.find(id); c != cold_pending_.end())
    return engine_.Adopt(engine_.now(), c->second.job.record, c->second.job.body);
  Status st = AdoptStored(id);
  return st.code() == Code::kNotFound ? Status::Ok() : st;
}

Status LocalBackend::ColdPage(const ListJobsRequest& r, std::vector<ColdJob>* out) {
  // Jobs the engine let go of are looked up with the rest (LoadTopic).
  Collect();
  const std::string topic(r.topic);
  const size_t keep = size_t{r.limit} + 1;
  auto before = [desc = r.desc](JobId a, JobId b) { return desc ? a > b : a < b; };
  std::vector<JobId> ids;
  auto consider = [&](JobId id) {
    if (engine_.HasJob(id) || deleting_.count(id) > 0) return;
    if (r.after != 0 && (r.desc ? id >= r.after : id <= r.after)) return;
    ids.push_back(id);
    if (ids.size() >= 2 * keep) {
      std::nth_element(ids.begin(), ids.begin() + keep - 1, ids.end(), before);
      ids.resize(keep);
    }
  };
  Status st = store_->ScanDue(topic, engine_.TopicMark(topic), kNever, [&](DueMark m) {
    if (cold_pending_.count(m.id) == 0) consider(m.id);
    return true;
  });
  if (!st.ok()) return st;
  for (const auto& [id, p] : cold_pending_)
    if (p.job.record.topic == topic) consider(id);
  std::sort(ids.begin(), ids.end(), before);
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.size() > keep) ids.resize(keep);
  for (JobId id : ids) {
    if (auto c = cold_pending_.find(id); c != cold_pending_.end()) {
      out->push_back(c->second.job);
      continue;
    }
    ColdJob c;
    Status got = store_->GetJob(id, &c.record, &c.body);
    if (got.code() == Code::kNotFound) continue;
    if (!got.ok()) return got;
    if (c.record.state == JobState::kDelayed) out->push_back(std::move(c));
  }
  return Status::Ok();
}

Status LocalBackend::WarmKey(std::string_view topic, std::string_view key) {
  if (!horizon_on() || key.empty() || engine_.ColdJobs(topic) == 0 || engine_.HasKey(topic, key))
    return Status::Ok();
  std::string user_key = store::UserKey(topic, key);
  if (auto k = cold_pending_keys_.find(user_key); k != cold_pending_keys_.end())
    return WarmId(k->second);
  JobId id = 0;
  Status st = store_->FindKey(topic, key, &id);
  if (st.code() == Code::kNotFound) return Status::Ok();
  if (!st.ok()) return st;
  return WarmId(id);
}

Status LocalBackend::WarmName(std::string_view name) {
  if (!horizon_on() || name.empty() || engine_.ColdJobs() == 0) return Status::Ok();
  if (!engine_.HasName(name)) {
    JobId id = 0;
    if (auto k = cold_pending_keys_.find(store::NameKey(name)); k != cold_pending_keys_.end()) {
      id = k->second;
    } else if (Status st = store_->FindKey({}, name, &id);
               !st.ok() && st.code() != Code::kNotFound) {
      return st;
    }
    if (id != 0)
      if (Status st = WarmId(id); !st.ok()) return st;
  }
  // A job without a name is named by its id (Engine::ResolveName).
  if (JobId id = ParseDecimalId(name); id != 0 && !engine_.HasName(name)) return WarmId(id);
  return Status::Ok();
}

Result<LocalBackend::Loaded> LocalBackend::LoadTopic(const std::string& topic, TimeMs through,
                                                     size_t batch) {
  constexpr JobId kAllIds = std::numeric_limits<JobId>::max();
  // Jobs the engine let go of are looked up with the rest. The adoptions
  // below run at the engine's present: they let nothing go (no TTR
  // expires) while the mark moves.
  Collect();
  DueMark from = engine_.TopicMark(topic);
  Loaded out;
  if (from >= DueMark{through, kAllIds}) return out;
  std::vector<DueMark> stored;
  Status st = store_->ScanDue(topic, from, through, [&](DueMark m) {
    if (stored.size() == batch) {
      out.more = true;
      return false;
    }
    stored.push_back(m);
    return true;
  });
  if (!st.ok()) return st;
  DueMark to = out.more ? stored.back() : DueMark{through, kAllIds};
  auto taken = [&](JobId id) {
    return engine_.HasJob(id) || deleting_.count(id) > 0 || cold_pending_.count(id) > 0;
  };
  for (DueMark m : stored) {
    if (taken(m.id)) continue;  // in memory, or the store is behind
    if (Status a = AdoptStored(m.id); !a.ok()) return a;
    out.jobs++;
  }
  // Jobs let go of whose writes are still on their way.
  std::vector<const ColdJob*> unwritten;
  for (const auto& [id, p] : cold_pending_) {
    const JobRecord& r = p.job.record;
    DueMark m{r.due_ms, id};
    if (r.topic == topic && m > from && m <= to && !engine_.HasJob(id) && deleting_.count(id) == 0)
      unwritten.push_back(&p.job);
  }
  for (const ColdJob* c : unwritten) {
    if (Status a = engine_.Adopt(engine_.now(), c->record, c->body); !a.ok()) return a;
    out.jobs++;
  }
  engine_.SetTopicMark(topic, out.more ? std::optional<DueMark>(to) : std::nullopt);
  return out;
}

Status LocalBackend::LoadNext(const std::string& topic, uint64_t n) {
  uint64_t loaded = 0;
  while (loaded < n && engine_.ColdJobs(topic) > 0) {
    auto r = LoadTopic(topic, kNever, std::max<size_t>(64, n - loaded));
    if (!r.ok()) return r.status();
    loaded += r->jobs;
    if (!r->more) break;
  }
  return Status::Ok();
}

void LocalBackend::LoadHorizon() {
  if (!horizon_on()) return;
  // Time first: what it lets go of (a TTR expiring into a long back-off)
  // goes against the marks as they are, before any of them moves.
  engine_.Advance(EngineNow());
  Collect();
  TimeMs through = engine_.now_ms() + horizon_ms_;
  bool lagging = false;
  for (const std::string& topic : engine_.TopicsWithColdJobs()) {
    auto r = LoadTopic(topic, through, horizon_batch_);
    if (!r.ok()) {
      // A failing disk: try again at the next turn; the topic keeps its
      // mark (its cold jobs must stay beyond it) while the others move on.
      engine_.SetTopicMark(topic, engine_.TopicMark(topic));
      std::fprintf(stderr, "level=error event=horizon_load_failed topic=%s error=\"%s\"\n",
                   topic.c_str(), r.status().message().c_str());
      lagging = true;
      continue;
    }
    lagging |= r->more;
  }
  engine_.SetHorizon(through);
  Settle();
  ArmHorizonTimer(lagging);
}

void LocalBackend::ArmHorizonTimer(bool soon) {
  std::weak_ptr<bool> alive = alive_;
  if (soon) {
    if (horizon_posted_) return;
    horizon_posted_ = true;
    boost::asio::post(io_, [this, alive] {
      if (alive.expired()) return;
      horizon_posted_ = false;
      LoadHorizon();
    });
    return;
  }
  // A quarter of the horizon (at most a second) between loads: a job enters
  // memory well before it is due.
  horizon_timer_.expires_after(
      std::chrono::milliseconds(std::clamp<TimeMs>(horizon_ms_ / 4, 1, 1000)));
  horizon_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    LoadHorizon();
  });
}

}  // namespace delayq::backend
