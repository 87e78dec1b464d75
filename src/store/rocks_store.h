// The embedded store on RocksDB: column families `jobs`, `due` and `keys`
// (docs/storage.md). Apply writes one atomic WriteBatch. The store keeps a
// journal (journal()) that the caller appends every batch to before it
// hands the batch to ApplyThrough with the record's number; RocksDB then
// writes without its log, its memtables are flushed as a checkpoint when a
// journal segment is sealed, and Open applies the journal's records past
// the last checkpoint again. Under kAlways ApplyThrough syncs the journal
// (preallocated) before it returns, and a batch without a record goes to
// RocksDB's log, synced; under kEverySec a background thread syncs the
// journal (and RocksDB's log) once a second.
#ifndef DELAYQ_STORE_ROCKS_STORE_H_
#define DELAYQ_STORE_ROCKS_STORE_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "store/journal.h"
#include "store/store.h"

namespace rocksdb {
class DB;
class Env;
class ColumnFamilyHandle;
class WriteBatch;
}  // namespace rocksdb

namespace delayq::store {

struct RocksStoreOptions {
  std::string dir;
  FsyncPolicy fsync = FsyncPolicy::kEverySec;
  // How many recently written jobs Apply remembers (see recent_ below);
  // tests make it small to exercise reads of forgotten jobs.
  size_t recent_jobs = 65'536;
  // Size at which a journal segment is sealed; 0: the journal's default.
  // Tests make it small to exercise checkpoints.
  uint64_t journal_segment_bytes = 0;
  // Not owned (it must outlive the store); nullptr: the default. Tests
  // give one whose file system fails on demand (a full disk).
  rocksdb::Env* env = nullptr;
};

class RocksStore final : public Store {
 public:
  // Opens (creating if needed) the store in options.dir. Returns
  // kCorruption for damaged files, kInvalidArgument for a directory that is
  // not a delayq store of a known format, kUnavailable for I/O errors.
  static Result<std::unique_ptr<RocksStore>> Open(const RocksStoreOptions& options);
  ~RocksStore() override;

  Status Apply(const std::vector<Mutation>& batch) override { return Write(batch, 0, nullptr); }
  Status ApplyThrough(std::vector<Mutation>& batch, uint64_t journal_lsn) override {
    return Write(batch, journal_lsn, &batch);
  }
  Status Load(const std::function<Status(const JobRecord&, std::string_view body)>& job,
              JobId* max_id) override;
  Status LoadObjects(const std::function<Status(const StoredObject&)>& object) override;
  Status NoteMaxId(JobId id) override;
  uint64_t ApproximateJobs() const override;
  Status GetJob(JobId id, JobRecord* record, std::string* body) override;
  Status FindKey(std::string_view topic, std::string_view key, JobId* id) override;
  Status ScanDue(std::string_view topic, DueMark after, TimeMs through,
                 const std::function<bool(DueMark)>& visit) override;

  // The journal batches go to before Apply. Owned by the store.
  Journal* journal() const { return journal_.get(); }
  // The syncs timed so far, and the size of options.dir's files.
  StoreSample Sample() const override;
  // How many journal records Open applied again (a crash left them).
  uint64_t replayed_records() const { return replayed_records_; }
  // Where Open ended the journal early: the records a power cut left
  // unwritten before they were synced (lsn 0: nowhere).
  const JournalCut& journal_cut() const { return journal_cut_; }

 private:
  explicit RocksStore(const RocksStoreOptions& options);
  void SyncLoop();
  // Apply and ApplyThrough. given_up: the batch itself, when its bodies may
  // be moved into recent_ once it is written (else they are copied).
  Status Write(const std::vector<Mutation>& batch, uint64_t journal_lsn,
               std::vector<Mutation>* given_up);
  // Applies the journal's records past the last checkpoint, flushes them to
  // tables and removes the journal (Open).
  Status ReplayJournal();

  // What Apply last wrote for recently written jobs, so that an update or a
  // delete finds the image it replaces (the body an update keeps, the index
  // entries to remove) without reading the store. Only Apply's thread uses
  // it, and only after a successful write, so it never runs ahead of the
  // store. Bounded; the oldest entries go first.
  struct Cached {
    JobRecord record;
    std::string body;
  };
  static constexpr size_t kRecentBytes = size_t{16} << 20;
  void Remember(JobId id, JobRecord record, std::string body);
  void Forget(JobId id);
  static size_t CachedBytes(const Cached& c);

  RocksStoreOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* jobs_ = nullptr;
  rocksdb::ColumnFamilyHandle* due_ = nullptr;
  rocksdb::ColumnFamilyHandle* keys_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;  // the default family
  JobId max_id_ = 0;
  bool failed_ = false;  // the last write failed: Resume before the next
  std::unique_ptr<Journal> journal_;
  bool wal_off_ = false;      // writes skip RocksDB's log (a journal holds them)
  uint64_t journal_lsn_ = 0;  // the last journal record written to RocksDB
  uint64_t replayed_records_ = 0;
  JournalCut journal_cut_;
  // Write's batch for RocksDB, kept from one write to the next so that its
  // buffer is not grown again each time (given back past kWriteBatchBytes).
  std::unique_ptr<rocksdb::WriteBatch> write_batch_;
  static constexpr size_t kWriteBatchBytes = size_t{16} << 20;
  std::unordered_map<JobId, Cached> recent_;
  std::deque<JobId> recent_order_;  // ids in recent_ (and forgotten ones), oldest first
  size_t recent_bytes_ = 0;

  // Observed on the writer thread (kAlways) or the syncer (kEverySec).
  SharedLatencyHistogram syncs_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread syncer_;  // kEverySec
};

}  // namespace delayq::store

#endif  // DELAYQ_STORE_ROCKS_STORE_H_
