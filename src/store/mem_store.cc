#include "store/mem_store.h"

#include <algorithm>

namespace delayq::store {

Status MemStore::Apply(const std::vector<Mutation>& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  // All or none: check the batch against a copy of what it touches first.
  std::map<JobId, std::optional<Stored>> touched;
  std::map<std::pair<ObjectKind, std::string>, std::optional<std::string>> objects;
  for (const Mutation& m : batch) {
    if (m.is_object()) {
      auto& slot = objects[{m.object.kind, m.object.name}];
      if (m.kind == Mutation::Kind::kPutObject) {
        slot = m.object.value;
      } else {
        slot.reset();
      }
      continue;
    }
    JobId id = m.record.id;
    auto [it, fresh] = touched.try_emplace(id);
    if (fresh) {
      auto found = jobs_.find(id);
      if (found != jobs_.end()) it->second = found->second;
    }
    switch (m.kind) {
      case Mutation::Kind::kPut:
        it->second = Stored{m.record, m.body};
        break;
      case Mutation::Kind::kUpdate:
        if (!it->second)
          return Status::Internal("update of job " + std::to_string(id) +
                                  ", which the store does not hold");
        it->second->record = m.record;
        break;
      case Mutation::Kind::kDelete:
        it->second.reset();
        break;
      case Mutation::Kind::kPutObject:
      case Mutation::Kind::kDeleteObject:
        break;
    }
  }
  for (auto& [key, value] : objects) {
    if (value) {
      objects_[key] = std::move(*value);
    } else {
      objects_.erase(key);
    }
  }
  for (auto& [id, stored] : touched) {
    if (stored) {
      jobs_[id] = std::move(*stored);
      if (id > max_id_) max_id_ = id;
    } else {
      jobs_.erase(id);
    }
  }
  applies_++;
  return Status::Ok();
}

Status MemStore::Load(const std::function<Status(const JobRecord&, std::string_view)>& job,
                      JobId* max_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, stored] : jobs_)
    if (Status st = job(stored.record, stored.body); !st.ok()) return st;
  *max_id = max_id_;
  return Status::Ok();
}

Status MemStore::LoadObjects(const std::function<Status(const StoredObject&)>& object) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, value] : objects_)
    if (Status st = object(StoredObject{key.first, key.second, value}); !st.ok()) return st;
  return Status::Ok();
}

Status MemStore::NoteMaxId(JobId id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id > max_id_) max_id_ = id;
  return Status::Ok();
}

Status MemStore::GetJob(JobId id, JobRecord* record, std::string* body) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::NotFound();
  if (record != nullptr) *record = it->second.record;
  if (body != nullptr) *body = it->second.body;
  return Status::Ok();
}

Status MemStore::FindKey(std::string_view topic, std::string_view key, JobId* id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [job_id, stored] : jobs_) {
    const bool place = topic.empty() ? stored.record.named : stored.record.topic == topic;
    if (!key.empty() && place && stored.record.key == key) {
      *id = job_id;
      return Status::Ok();
    }
  }
  return Status::NotFound();
}

Status MemStore::ScanDue(std::string_view topic, DueMark after, TimeMs through,
                         const std::function<bool(DueMark)>& visit) {
  std::vector<DueMark> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, stored] : jobs_) {
      const JobRecord& r = stored.record;
      DueMark m{r.due_ms, id};
      if (r.state == JobState::kDelayed && r.topic == topic && m > after && r.due_ms <= through)
        due.push_back(m);
    }
  }
  std::sort(due.begin(), due.end());
  for (DueMark m : due)
    if (!visit(m)) break;
  return Status::Ok();
}

size_t MemStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

uint64_t MemStore::applies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return applies_;
}

Status FaultyStore::Injected() {
  bool fail = full_;
  for (int n = fail_next_.load(); !fail && n > 0;)
    fail = fail_next_.compare_exchange_weak(n, n - 1);
  if (!fail) return Status::Ok();
  failures_++;
  return Status::Unavailable("injected fault: no space left on device");
}

Status FaultyStore::Apply(const std::vector<Mutation>& batch) {
  if (Status st = Injected(); !st.ok()) return st;
  return inner_.Apply(batch);
}

Status FaultyStore::NoteMaxId(JobId id) {
  if (Status st = Injected(); !st.ok()) return st;
  return inner_.NoteMaxId(id);
}

}  // namespace delayq::store
