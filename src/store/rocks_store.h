// The embedded store on RocksDB: column families `jobs`, `due` and `keys`
// (docs/storage.md). Apply writes one atomic WriteBatch; with kAlways the
// write-ahead log is synced before it returns, with kEverySec a background
// thread syncs it once a second.
#ifndef DELAYQ_STORE_ROCKS_STORE_H_
#define DELAYQ_STORE_ROCKS_STORE_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "store/store.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace delayq::store {

struct RocksStoreOptions {
  std::string dir;
  FsyncPolicy fsync = FsyncPolicy::kEverySec;
};

class RocksStore final : public Store {
 public:
  // Opens (creating if needed) the store in options.dir. Returns
  // kCorruption for damaged files, kInvalidArgument for a directory that is
  // not a delayq store of a known format, kUnavailable for I/O errors.
  static Result<std::unique_ptr<RocksStore>> Open(const RocksStoreOptions& options);
  ~RocksStore() override;

  Status Apply(const std::vector<Mutation>& batch) override;
  Status Load(const std::function<Status(const JobRecord&, std::string_view body)>& job,
              JobId* max_id) override;
  Status NoteMaxId(JobId id) override;
  uint64_t ApproximateJobs() const override;
  Status GetJob(JobId id, JobRecord* record, std::string* body) override;
  Status FindKey(std::string_view topic, std::string_view key, JobId* id) override;
  Status ScanDue(std::string_view topic, DueMark after, TimeMs through,
                 const std::function<bool(DueMark)>& visit) override;

 private:
  explicit RocksStore(const RocksStoreOptions& options);
  void SyncLoop();

  RocksStoreOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* jobs_ = nullptr;
  rocksdb::ColumnFamilyHandle* due_ = nullptr;
  rocksdb::ColumnFamilyHandle* keys_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;  // the default family
  JobId max_id_ = 0;
  bool failed_ = false;  // the last write failed: Resume before the next

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread syncer_;  // kEverySec
};

}  // namespace delayq::store

#endif  // DELAYQ_STORE_ROCKS_STORE_H_
