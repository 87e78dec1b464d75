#include "store/rocks_store.h"

#include <pthread.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/write_batch.h>
#include <rocksdb/write_buffer_manager.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <unordered_map>

#include "store/record_codec.h"

namespace delayq::store {
namespace {

constexpr const char* kFormatKey = "format";
constexpr const char* kMaxIdKey = "max_id";
// The last journal record the jobs families hold (8 bytes, big-endian).
constexpr const char* kJournalLsnKey = "journal_lsn";
// Ids up to this may have been handed out (NoteMaxId): written ahead of
// them, and apart from `max_id`, which the writer thread's batches carry.
constexpr const char* kIdLeaseKey = "id_lease";
// Journal records applied again at start per write.
constexpr size_t kReplayBatch = 4096;

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  std::string msg = std::string(what) + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (s.IsIOError() || s.IsNoSpace() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain())
    return Status::Unavailable(msg);
  if (s.IsInvalidArgument() || s.IsNotSupported()) return Status::InvalidArgument(msg);
  return Status::Internal(msg);
}

// RocksDB's own messages go to stderr (warnings and worse), not to a LOG
// file in the data directory: on a full disk that file fails too, and
// RocksDB 7.8 aborts on an assertion when it logs after such a failure.
class StderrLogger final : public rocksdb::Logger {
 public:
  StderrLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char buf[1024];
    int n = std::vsnprintf(buf, sizeof buf, format, ap);
    if (n < 0) return;
    std::string msg(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    for (char& c : msg)
      if (c == '"' || c == '\n') c = '\'';
    // A failing disk repeats the same complaint at every retry: say it once.
    std::lock_guard<std::mutex> lock(mu_);
    if (msg == last_) return;
    last_ = msg;
    std::fprintf(stderr, "level=warn event=rocksdb message=\"%s\"\n", msg.c_str());
  }

 private:
  std::mutex mu_;
  std::string last_;
};

std::string JournalDir(const std::string& dir) { return dir + "/journal"; }

std::string BigEndian(uint64_t v) { return JobKey(v); }  // same 8-byte form

uint64_t ReadBigEndian(std::string_view s) {
  JobId v = 0;
  ParseJobKey(s, &v);
  return v;
}

// Tuned for a queue (docs/storage.md, "Compaction and memory"): every job is
// put once, updated a few times and deleted, on ever-growing ids. Disk use
// follows the live jobs, memory stays bounded however many wait on disk.
//
// One block cache for every family, index and filter blocks included (else
// they are held beside it for every table: 20 MB for 10 million jobs).
constexpr size_t kBlockCacheBytes = size_t{32} << 20;
// One budget for the memtables of every family: past it the oldest is flushed.
constexpr size_t kMemtableBudgetBytes = size_t{64} << 20;
// A log file goes only once every family has flushed what it holds, and
// almost every batch writes max_id to the default family: without a limit
// old logs pile up to gigabytes. Past it, the families they hold are flushed.
constexpr uint64_t kMaxLogBytes = uint64_t{64} << 20;

enum class Family { kMeta, kJobs, kDue, kKeys };

rocksdb::DBOptions DbOptions() {
  rocksdb::DBOptions o;
  o.write_buffer_manager = std::make_shared<rocksdb::WriteBufferManager>(kMemtableBudgetBytes);
  o.max_total_wal_size = kMaxLogBytes;
  // Every flush and compaction appends to the MANIFEST: start a new one at
  // 16 MB, not 1 GB.
  o.max_manifest_file_size = uint64_t{16} << 20;
  // Writes under a journal skip RocksDB's log: every family's memtable is
  // then flushed at once, so the tables always hold the same prefix of the
  // writes, journal_lsn included.
  o.atomic_flush = true;
  return o;
}

rocksdb::ColumnFamilyOptions FamilyOptions(Family family,
                                           const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  t.cache_index_and_filter_blocks = true;
  // In 4 KB partitions: whole, a 64 MB table's index and filter (~1 MB)
  // outgrow a shard of the cache (512 KB), and every lookup read them again
  // (0.5 ms a lookup at 8 million jobs).
  t.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  t.partition_filters = true;
  // Every lookup reads the level-0 tables (they overlap): keep theirs.
  t.pin_l0_filter_and_index_blocks_in_cache = true;
  t.optimize_filters_for_memory = true;
  // Level targets follow the last level: space amplification stays about
  // 1.1 as the store grows and shrinks, and a small store compacts straight
  // into the last level, where tombstones are dropped.
  o.level_compaction_dynamic_level_bytes = true;
  // A queue deletes as much as it writes: a table that is half tombstones
  // is compacted at once, down to the values they delete, and both go. (Not
  // a sliding window: deletes cluster at the oldest ids, so it marks almost
  // every table: 2.4 times the compaction writes, same disk use on average.)
  o.table_properties_collector_factories.push_back(
      rocksdb::NewCompactOnDeletionCollectorFactory(0, 0, 0.5));
  // Jobs are deleted, they never expire: no rewriting of old tables on a
  // timer (both default to 30 days).
  o.ttl = 0;
  o.periodic_compaction_seconds = 0;
  switch (family) {
    case Family::kJobs:
      o.write_buffer_size = size_t{32} << 20;
      t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
      // Updates and deletes find their job, and a new id lies beyond every
      // table: no filter on the last level, which holds most of the jobs.
      o.optimize_filters_for_hits = true;
      break;
    case Family::kKeys:
      o.write_buffer_size = size_t{16} << 20;
      // Lookups by key mostly miss (a put with a new key): the filter
      // answers them without reading the tables.
      t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
      break;
    case Family::kDue:
      o.write_buffer_size = size_t{16} << 20;  // scanned in order: no filter
      break;
    case Family::kMeta:
      o.write_buffer_size = size_t{4} << 20;  // two keys
      break;
  }
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

}  // namespace

RocksStore::RocksStore(const RocksStoreOptions& options) : options_(options) {}

Result<std::unique_ptr<RocksStore>> RocksStore::Open(const RocksStoreOptions& options) {
  std::unique_ptr<RocksStore> store(new RocksStore(options));
  rocksdb::DBOptions db_options = DbOptions();
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.paranoid_checks = true;
  db_options.info_log = std::make_shared<StderrLogger>();
  if (options.env != nullptr) db_options.env = options.env;
  // A torn last record is what a crash leaves; damage before it is an error.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(kBlockCacheBytes);
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, FamilyOptions(Family::kMeta, cache)},
      {"jobs", FamilyOptions(Family::kJobs, cache)},
      {"due", FamilyOptions(Family::kDue, cache)},
      {"keys", FamilyOptions(Family::kKeys, cache)}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  // Made here, so that RocksDB does not log a failed listing of a missing
  // directory at the first start; a failure is Open's to report.
  std::error_code mkdir_error;
  std::filesystem::create_directories(options.dir, mkdir_error);
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.dir, families, &handles, &db);
  if (!s.ok()) return FromRocks(s, "opening the store in " + options.dir);
  store->db_.reset(db);
  store->meta_ = handles[0];
  store->jobs_ = handles[1];
  store->due_ = handles[2];
  store->keys_ = handles[3];

  std::string format;
  s = db->Get(rocksdb::ReadOptions(), store->meta_, kFormatKey, &format);
  if (s.IsNotFound()) {
    s = db->Put(rocksdb::WriteOptions(), store->meta_, kFormatKey,
                std::string(1, static_cast<char>(kRecordVersion)));
    if (!s.ok()) return FromRocks(s, "writing the format version");
  } else if (!s.ok()) {
    return FromRocks(s, "reading the format version");
  } else if (format.size() != 1 || static_cast<uint8_t>(format[0]) > kRecordVersion) {
    return Status::InvalidArgument("the store in " + options.dir +
                                   " has a format this delayqd does not know");
  }
  std::string max_id;
  s = db->Get(rocksdb::ReadOptions(), store->meta_, kMaxIdKey, &max_id);
  if (s.ok()) {
    store->max_id_ = ReadBigEndian(max_id);
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "reading the highest id");
  }
  std::string lease;
  s = db->Get(rocksdb::ReadOptions(), store->meta_, kIdLeaseKey, &lease);
  if (!s.ok() && !s.IsNotFound()) return FromRocks(s, "reading the ids handed out");
  if (Status st = store->ReplayJournal(); !st.ok()) return st;
  // (After the replay: its puts of ids above max_id need no look-up of an
  // image they replace.)
  if (s.ok()) store->max_id_ = std::max(store->max_id_, ReadBigEndian(lease));
  {
    Journal::Options jo;
    jo.dir = JournalDir(options.dir);
    jo.fsync = options.fsync;
    // Under always every reply waits for a sync of the journal: its
    // segments are written full of zeros ahead, so that a sync writes the
    // records alone (docs/storage.md, "The journal").
    jo.preallocate = options.fsync == FsyncPolicy::kAlways;
    if (options.journal_segment_bytes != 0) jo.segment_bytes = options.journal_segment_bytes;
    auto journal = Journal::Create(jo, store->journal_lsn_ + 1);
    if (!journal.ok()) return journal.status();
    store->journal_ = std::move(journal).value();
    store->wal_off_ = true;
  }
  if (options.fsync == FsyncPolicy::kEverySec) {
    store->syncer_ = std::thread([raw = store.get()] { raw->SyncLoop(); });
  }
  return store;
}

Status RocksStore::ReplayJournal() {
  std::string lsn;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_, kJournalLsnKey, &lsn);
  if (s.ok()) {
    journal_lsn_ = ReadBigEndian(lsn);
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "reading the journal's checkpoint");
  }
  std::string dir = JournalDir(options_.dir);
  // What a crash left in the journal goes to RocksDB (without its log),
  // the memtables are flushed, and then the journal is not needed.
  wal_off_ = true;
  std::vector<Mutation> pending;
  uint64_t pending_lsn = 0;
  auto apply_pending = [&]() -> Status {
    if (pending.empty()) return Status::Ok();
    Status st = ApplyThrough(pending, pending_lsn);
    pending.clear();
    return st;
  };
  uint64_t last = 0;
  Status st = Journal::Replay(
      dir, journal_lsn_,
      [&](uint64_t record, std::vector<Mutation>& batch) -> Status {
        for (Mutation& m : batch) pending.push_back(std::move(m));
        pending_lsn = record;
        replayed_records_++;
        return pending.size() >= kReplayBatch ? apply_pending() : Status::Ok();
      },
      &last, &journal_cut_);
  if (st.ok()) st = apply_pending();
  if (!st.ok()) return st;
  wal_off_ = false;
  if (replayed_records_ > 0) {
    rocksdb::FlushOptions fo;
    s = db_->Flush(fo, {jobs_, due_, keys_, meta_});
    if (!s.ok()) return FromRocks(s, "writing the replayed journal to tables");
  }
  return Journal::RemoveAll(dir);
}

RocksStore::~RocksStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (syncer_.joinable()) syncer_.join();
  // Every record the journal holds that the store took is in the memtables,
  // flushed next. (No journal: none was opened, or a start that failed is
  // being undone; the journal, if any, stays for the next start.)
  const bool all_taken = journal_ != nullptr && journal_->last_lsn() <= journal_lsn_;
  journal_.reset();  // synced and closed
  if (db_ != nullptr) {
    if (options_.fsync != FsyncPolicy::kNo) db_->SyncWAL();
    // Tables instead of a log to replay: the next start is faster. (A
    // failure leaves the log and the journal, replayed as after a crash.)
    rocksdb::FlushOptions fo;
    if (db_->Flush(fo, {jobs_, due_, keys_, meta_}).ok() && all_taken)
      (void)Journal::RemoveAll(JournalDir(options_.dir));  // else the next start does
    for (auto* h : {jobs_, due_, keys_, meta_})
      if (h != nullptr) db_->DestroyColumnFamilyHandle(h);
    db_->Close();
  }
}

StoreSample RocksStore::Sample() const {
  StoreSample out;
  // Under always the syncs replies wait for are the journal's.
  out.sync = options_.fsync == FsyncPolicy::kAlways && journal_ != nullptr
                 ? journal_->syncs().Snapshot()
                 : syncs_.Snapshot();
  // RocksDB's files and the journal's (its subdirectory); a file that goes
  // meanwhile (a compaction, a released segment) is left out.
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(options_.dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t n = it->file_size(size_ec);
      if (!size_ec) out.disk_bytes += n;
    }
  }
  return out;
}

void RocksStore::SyncLoop() {
  pthread_setname_np(pthread_self(), "delayq-sync");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::seconds(1));
    if (stop_) break;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    db_->SyncWAL();                                   // a failure shows again at the next write
    if (journal_ != nullptr) (void)journal_->Sync();  // likewise, at the next append
    syncs_.Observe(std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count());
    lock.lock();
  }
}

Status RocksStore::Write(const std::vector<Mutation>& batch, uint64_t journal_lsn,
                         std::vector<Mutation>* given_up) {
  // Under always the batch's journal records are synced first: that sync
  // is what makes them durable (the records of every batch appended since
  // join it), and RocksDB then takes them without its own log, as under
  // everysec.
  if (options_.fsync == FsyncPolicy::kAlways && journal_ != nullptr &&
      journal_lsn > journal_->synced_lsn()) {
    // (Waits for the loop's own sync if one is under way, and then syncs
    // only if that one did not cover the batch.)
    if (Status st = journal_->SyncThrough(journal_lsn); !st.ok()) return st;  // timed by it
  }
  // First the net effect of the batch on each job it touches: its image
  // before (from recent_, else read) and after. A job put and deleted in
  // the same batch then writes nothing, and an update that leaves the due
  // time or the key as they were does not rewrite that index entry.
  constexpr size_t kNoPut = static_cast<size_t>(-1);
  struct Change {
    bool before = false;  // stored before the batch, as before_record
    bool after = false;   // stored after it, as record with its body
    JobRecord before_record;
    JobRecord record;
    std::string body;     // the stored body, while no put of the batch replaces it
    size_t put = kNoPut;  // else the batch's last put of the job, which has it
  };
  std::unordered_map<JobId, size_t> index;
  index.reserve(batch.size());
  std::vector<std::pair<JobId, Change>> changes;  // in order of first touch
  changes.reserve(batch.size());
  JobId max_id = max_id_;
  // Named objects' changes, in order after the jobs' (they touch no job).
  std::vector<const Mutation*> objects;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Mutation& m = batch[i];
    if (m.is_object()) {
      objects.push_back(&m);
      continue;
    }
    const JobRecord& r = m.record;
    auto [slot, fresh] = index.try_emplace(r.id, changes.size());
    if (fresh) {
      // (Built in place: a Change holds two records, not cheap to move.)
      Change& c =
          changes
              .emplace_back(std::piecewise_construct, std::forward_as_tuple(r.id), std::tuple<>())
              .second;
      if (auto hit = recent_.find(r.id); hit != recent_.end()) {
        c.before = true;
        c.before_record = hit->second.record;
        c.body = hit->second.body;
      } else if (r.id <= max_id_) {  // ids above every stored one are new
        std::string value;
        rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), jobs_, JobKey(r.id), &value);
        if (!s.ok() && !s.IsNotFound()) return FromRocks(s, "reading job " + std::to_string(r.id));
        if (s.ok()) {
          std::string_view body;
          if (Status st = DecodeJobValue(value, &c.before_record, &body); !st.ok()) return st;
          c.before = true;
          c.body = std::string(body);
        }
      }
      c.after = c.before;
      if (c.before) c.record = c.before_record;
    }
    Change& c = changes[slot->second].second;
    switch (m.kind) {
      case Mutation::Kind::kDelete:
        c.after = false;
        break;
      case Mutation::Kind::kUpdate:  // keeps the body
        if (!c.after)
          return Status::Internal("update of job " + std::to_string(r.id) +
                                  ", which the store does not hold");
        c.record = r;
        break;
      case Mutation::Kind::kPut:
        c.after = true;
        c.record = r;
        c.put = i;
        break;
      case Mutation::Kind::kPutObject:
      case Mutation::Kind::kDeleteObject:
        break;
    }
    if (r.id > max_id) max_id = r.id;
  }

  auto body_of = [&](const Change& c) -> const std::string& {
    return c.put != kNoPut ? batch[c.put].body : c.body;
  };
  if (write_batch_ == nullptr) write_batch_ = std::make_unique<rocksdb::WriteBatch>();
  rocksdb::WriteBatch& wb = *write_batch_;
  wb.Clear();
  std::vector<const JobRecord*> key_puts;   // after every key delete: a key
                                            // may pass from a deleted job to a new one
  std::vector<const JobRecord*> name_puts;  // likewise
  std::string value;
  for (const auto& [id, c] : changes) {
    if (!c.before && !c.after) continue;  // born and gone in this batch
    const JobRecord* b = c.before ? &c.before_record : nullptr;
    const JobRecord* a = c.after ? &c.record : nullptr;
    if (b != nullptr && a != nullptr && *a == *b) continue;  // nothing changed
    bool b_due = b != nullptr && b->state == JobState::kDelayed;
    bool a_due = a != nullptr && a->state == JobState::kDelayed;
    bool same_due = b_due && a_due && a->due_ms == b->due_ms && a->topic == b->topic;
    if (b_due && !same_due) wb.Delete(due_, DueKey(b->topic, b->due_ms, id));
    if (a_due && !same_due) wb.Put(due_, DueKey(a->topic, a->due_ms, id), "");
    bool same_key = b != nullptr && a != nullptr && a->key == b->key && a->topic == b->topic;
    if (b != nullptr && !b->key.empty() && !same_key) wb.Delete(keys_, UserKey(b->topic, b->key));
    if (a != nullptr && !a->key.empty() && !same_key) key_puts.push_back(a);
    // A name (JobRecord::named) is a key of the topic "" (store.h, FindKey).
    bool b_named = b != nullptr && b->named, a_named = a != nullptr && a->named;
    bool same_name = b_named && a_named && a->key == b->key;
    if (b_named && !same_name) wb.Delete(keys_, NameKey(b->key));
    if (a_named && !same_name) name_puts.push_back(a);
    if (a == nullptr) {
      wb.Delete(jobs_, JobKey(id));
    } else {
      value.clear();
      EncodeJobValue(*a, body_of(c), &value);
      wb.Put(jobs_, JobKey(id), value);
    }
  }
  for (const JobRecord* a : key_puts) wb.Put(keys_, UserKey(a->topic, a->key), JobKey(a->id));
  for (const JobRecord* a : name_puts) wb.Put(keys_, NameKey(a->key), JobKey(a->id));
  for (const Mutation* m : objects) {
    if (m->kind == Mutation::Kind::kDeleteObject) {
      wb.Delete(meta_, ObjectKey(m->object.kind, m->object.name));
    } else {
      value.clear();
      EncodeObjectValue(m->object, &value);
      wb.Put(meta_, ObjectKey(m->object.kind, m->object.name), value);
    }
  }
  if (max_id > max_id_) wb.Put(meta_, kMaxIdKey, BigEndian(max_id));
  if (journal_lsn > journal_lsn_) wb.Put(meta_, kJournalLsnKey, BigEndian(journal_lsn));
  if (wb.Count() == 0) return Status::Ok();
  if (failed_) {
    // After a failed write RocksDB refuses every write until it is told to
    // try again (a full disk may have space now).
    rocksdb::Status r = db_->Resume();
    if (!r.ok()) return FromRocks(r, "resuming after a failed write");
    failed_ = false;
  }
  // A batch no journal record holds (journal_lsn 0: the last changes at
  // close, tests) goes through RocksDB's log under always, synced.
  const bool logged = !wal_off_ || (options_.fsync == FsyncPolicy::kAlways && journal_lsn == 0);
  rocksdb::WriteOptions wo;
  wo.sync = options_.fsync == FsyncPolicy::kAlways && logged;
  wo.disableWAL = !logged;
  const auto start = std::chrono::steady_clock::now();
  rocksdb::Status s = db_->Write(wo, &wb);
  if (wo.sync)
    syncs_.Observe(std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count());
  if (!s.ok()) {
    failed_ = true;
    return FromRocks(s, "writing " + std::to_string(batch.size()) + " changes");
  }
  max_id_ = max_id;
  if (journal_lsn > journal_lsn_) journal_lsn_ = journal_lsn;
  for (auto& [id, c] : changes) {
    if (!c.after) {
      Forget(id);
    } else if (c.put == kNoPut) {
      Remember(id, std::move(c.record), std::move(c.body));
    } else if (given_up != nullptr) {  // written: the caller has no more use for it
      Remember(id, std::move(c.record), std::move((*given_up)[c.put].body));
    } else {
      Remember(id, std::move(c.record), batch[c.put].body);
    }
  }
  // The buffer stays for the next write, unless a burst made it large.
  if (wb.GetDataSize() > kWriteBatchBytes) write_batch_.reset();
  if (journal_ != nullptr && journal_->HasSealed()) {
    // A checkpoint: the tables then hold every record written so far, and
    // the sealed segments can go. (A failure is tried again next time.)
    rocksdb::FlushOptions fo;
    if (db_->Flush(fo, {jobs_, due_, keys_, meta_}).ok()) journal_->ReleaseThrough(journal_lsn_);
  }
  return Status::Ok();
}

void RocksStore::Remember(JobId id, JobRecord record, std::string body) {
  auto [it, fresh] = recent_.try_emplace(id);
  if (fresh) {
    recent_order_.push_back(id);
  } else {
    recent_bytes_ -= CachedBytes(it->second);
  }
  it->second.record = std::move(record);
  it->second.body = std::move(body);
  recent_bytes_ += CachedBytes(it->second);
  // Oldest first out (a deleted job's id is skipped when its turn comes).
  while (recent_order_.size() > options_.recent_jobs || recent_bytes_ > kRecentBytes) {
    JobId old = recent_order_.front();
    recent_order_.pop_front();
    Forget(old);
  }
}

void RocksStore::Forget(JobId id) {
  auto it = recent_.find(id);
  if (it == recent_.end()) return;
  recent_bytes_ -= CachedBytes(it->second);
  recent_.erase(it);
}

size_t RocksStore::CachedBytes(const Cached& c) {
  // The map node and the strings' heap parts, roughly.
  return sizeof(Cached) + 64 + c.record.topic.capacity() + c.record.key.capacity() +
         c.body.capacity();
}

Status RocksStore::Load(const std::function<Status(const JobRecord&, std::string_view)>& job,
                        JobId* max_id) {
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;  // one pass over everything: keep the cache for what follows
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, jobs_));
  JobId highest = max_id_;
  JobRecord r;  // decoded into again and again: its strings keep their buffers
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    JobId id;
    if (!ParseJobKey(it->key().ToStringView(), &id))
      return Status::Corruption("a job key of " + std::to_string(it->key().size()) + " bytes");
    std::string_view body;
    Status st = DecodeJobValue(it->value().ToStringView(), &r, &body);
    if (!st.ok()) return Status::Corruption("job " + std::to_string(id) + ": " + st.message());
    if (r.id != id)
      return Status::Corruption("job " + std::to_string(id) + " stored under another id");
    if (id > highest) highest = id;
    if (Status cb = job(r, body); !cb.ok()) return cb;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "reading the jobs");
  *max_id = highest;
  return Status::Ok();
}

Status RocksStore::LoadObjects(const std::function<Status(const StoredObject&)>& object) {
  // The objects' slice of `default`: the prefix up to, not including, the
  // prefix with its NUL raised to 1.
  std::string end(kObjectKeyPrefix);
  end.back() = '\1';
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, meta_));
  StoredObject o;
  for (it->Seek(rocksdb::Slice(kObjectKeyPrefix.data(), kObjectKeyPrefix.size())); it->Valid();
       it->Next()) {
    if (Status st = DecodeObjectValue(it->value().ToStringView(), &o); !st.ok())
      return Status::Corruption("a named object: " + st.message());
    if (ObjectKey(o.kind, o.name) != it->key().ToStringView())
      return Status::Corruption("object " + o.name + " stored under another key");
    if (Status cb = object(o); !cb.ok()) return cb;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "reading the named objects");
  return Status::Ok();
}

Status RocksStore::GetJob(JobId id, JobRecord* record, std::string* body) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), jobs_, JobKey(id), &value);
  if (s.IsNotFound()) return Status::NotFound();
  if (!s.ok()) return FromRocks(s, "reading job " + std::to_string(id));
  std::string_view stored_body;
  if (Status st = DecodeJobValue(value, record, &stored_body); !st.ok())
    return Status::Corruption("job " + std::to_string(id) + ": " + st.message());
  body->assign(stored_body);
  return Status::Ok();
}

Status RocksStore::FindKey(std::string_view topic, std::string_view key, JobId* id) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), keys_, UserKey(topic, key), &value);
  if (s.IsNotFound()) return Status::NotFound();
  if (!s.ok()) return FromRocks(s, "reading a key");
  if (!ParseJobKey(value, id)) return Status::Corruption("a key names no job id");
  return Status::Ok();
}

Status RocksStore::ScanDue(std::string_view topic, DueMark after, TimeMs through,
                           const std::function<bool(DueMark)>& visit) {
  // The topic's entries: "topic\0..." up to, not including, "topic\1".
  std::string end(topic);
  end.push_back('\1');
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, due_));
  for (it->Seek(DueKey(topic, after.due, after.id)); it->Valid(); it->Next()) {
    std::string_view key_topic;
    DueMark m;
    if (!ParseDueKey(it->key().ToStringView(), &key_topic, &m.due, &m.id) || key_topic != topic)
      return Status::Corruption("a due-index key of " + std::to_string(it->key().size()) +
                                " bytes");
    if (m <= after) continue;
    if (m.due > through || !visit(m)) break;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "reading the due index");
  return Status::Ok();
}

uint64_t RocksStore::ApproximateJobs() const {
  uint64_t n = 0;
  if (!db_->GetIntProperty(jobs_, "rocksdb.estimate-num-keys", &n)) return 0;
  return n;
}

Status RocksStore::NoteMaxId(JobId id) {
  // Through RocksDB's log, synced (under `no` written only), on the
  // calling thread; max_id_ is the writer thread's and stays as it is.
  rocksdb::WriteOptions wo;
  wo.sync = options_.fsync != FsyncPolicy::kNo;
  rocksdb::Status s = db_->Put(wo, meta_, kIdLeaseKey, BigEndian(id));
  if (!s.ok()) return FromRocks(s, "writing the ids handed out");
  return Status::Ok();
}

}  // namespace delayq::store
