// Stores for tests: MemStore keeps everything in memory (what RocksStore
// would hold, without the disk); FaultyStore wraps another store and fails
// its writes on demand, as a full or failing disk would.
//
// Thread: as Store. FaultyStore's switches may be flipped from any thread.
#ifndef DELAYQ_STORE_MEM_STORE_H_
#define DELAYQ_STORE_MEM_STORE_H_

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "store/store.h"

namespace delayq::store {

class MemStore final : public Store {
 public:
  Status Apply(const std::vector<Mutation>& batch) override;
  Status Load(const std::function<Status(const JobRecord&, std::string_view body)>& job,
              JobId* max_id) override;
  Status LoadObjects(const std::function<Status(const StoredObject&)>& object) override;
  Status NoteMaxId(JobId id) override;
  uint64_t ApproximateJobs() const override { return size(); }
  Status GetJob(JobId id, JobRecord* record, std::string* body) override;
  Status FindKey(std::string_view topic, std::string_view key, JobId* id) override;
  Status ScanDue(std::string_view topic, DueMark after, TimeMs through,
                 const std::function<bool(DueMark)>& visit) override;

  size_t size() const;
  uint64_t applies() const;

 private:
  struct Stored {
    JobRecord record;
    std::string body;
  };
  mutable std::mutex mu_;  // tests read while a writer thread applies
  std::map<JobId, Stored> jobs_;
  std::map<std::pair<ObjectKind, std::string>, std::string> objects_;
  JobId max_id_ = 0;
  uint64_t applies_ = 0;
};

// Passes every call to another store; tests override what they intercept.
class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(Store& inner) : inner_(inner) {}
  Status Apply(const std::vector<Mutation>& batch) override { return inner_.Apply(batch); }
  Status Load(const std::function<Status(const JobRecord&, std::string_view body)>& job,
              JobId* max_id) override {
    return inner_.Load(job, max_id);
  }
  Status LoadObjects(const std::function<Status(const StoredObject&)>& object) override {
    return inner_.LoadObjects(object);
  }
  Status NoteMaxId(JobId id) override { return inner_.NoteMaxId(id); }
  uint64_t ApproximateJobs() const override { return inner_.ApproximateJobs(); }
  Status GetJob(JobId id, JobRecord* record, std::string* body) override {
    return inner_.GetJob(id, record, body);
  }
  Status FindKey(std::string_view topic, std::string_view key, JobId* id) override {
    return inner_.FindKey(topic, key, id);
  }
  Status ScanDue(std::string_view topic, DueMark after, TimeMs through,
                 const std::function<bool(DueMark)>& visit) override {
    return inner_.ScanDue(topic, after, through, visit);
  }

 protected:
  Store& inner_;
};

class FaultyStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;

  Status Apply(const std::vector<Mutation>& batch) override;
  Status NoteMaxId(JobId id) override;

  // While set, every write fails with kUnavailable ("no space left").
  void set_full(bool full) { full_ = full; }
  // The next `n` writes fail, then writes work again.
  void FailNext(int n) { fail_next_ = n; }
  uint64_t failures() const { return failures_; }

 private:
  // kUnavailable when this write is to fail (and counts it).
  Status Injected();
  std::atomic<bool> full_{false};
  std::atomic<int> fail_next_{0};
  std::atomic<uint64_t> failures_{0};
};

}  // namespace delayq::store

#endif  // DELAYQ_STORE_MEM_STORE_H_
