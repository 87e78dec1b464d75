// The journal (docs/storage.md, "The journal"): under `everysec` and `no`
// the loop thread appends every batch of changes here, one record per batch,
// before it replies; RocksDB takes the same batches later on the writer
// thread, without a log of its own, and a job put and deleted within one of
// its writes never reaches it. At start the records RocksDB does not hold
// yet are applied again (Replay), and a checkpoint (a flush of RocksDB's
// memtables) lets the segments it covers go.
//
// Files: <dir>/<first record number, 20 digits>.jnl, each a header and
// records; a segment is sealed once it passes `segment_bytes` and a new
// one starts.
//
// Thread: Append on one thread (the loop thread); Sync, HasSealed and
// ReleaseThrough from any other.
#ifndef DELAYQ_STORE_JOURNAL_H_
#define DELAYQ_STORE_JOURNAL_H_

#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/histogram.h"
#include "delayq/status.h"
#include "delayq/types.h"
#include "store/store.h"

namespace delayq::store {

// The journal's format version, in every segment's header. Version 2 adds
// the change kinds 3 and 4 (a named object put or deleted); version 3 puts
// in every record the number of the last record synced when it was
// appended (what Replay tells a power cut's unwritten tail from damage
// by). Older segments read as before.
inline constexpr uint8_t kJournalVersion = 3;

// Where Replay ended the journal early: records a power cut left unwritten
// (pages of the part not yet synced that never reached the disk), none of
// them known to have been synced. `lsn` 0: no cut.
struct JournalCut {
  uint64_t lsn = 0;            // the first record not replayed
  std::string path;            // the segment it was due in
  uint64_t offset = 0;         // where in it
  uint64_t records_after = 0;  // whole records found past the hole, not replayed
  uint64_t last_synced = 0;    // the highest record any record says was synced
  std::string what;            // what was found there
};

// CRC-32C (Castagnoli) as the journal uses it, with the CPU's instruction
// where there is one, and the table-driven reference (for tests).
uint32_t JournalCrc32c(std::string_view data);
uint32_t JournalCrc32cPortable(std::string_view data);

class Journal {
 public:
  struct Options {
    std::string dir;
    FsyncPolicy fsync = FsyncPolicy::kEverySec;
    uint64_t segment_bytes = uint64_t{32} << 20;
    // Write zeros ahead of the appends (kPreallocateBytes at a time), so
    // that the blocks an append writes are already the file's: a sync
    // then writes the data alone, not a new file size and new blocks too
    // (the metadata fdatasync must flush when a file grows). For
    // `--fsync always`, whose every reply waits for a sync.
    bool preallocate = false;
    // How a file's data is synced: ::fdatasync, or a failing one in tests.
    int (*datasync)(int fd) = ::fdatasync;
    // How a record is written: ::pwrite, or a failing one in tests.
    ssize_t (*pwrite)(int fd, const void* data, size_t n, off_t at) = ::pwrite;
  };
  // How far ahead of the appends zeros are written (Options::preallocate).
  static constexpr uint64_t kPreallocateBytes = uint64_t{1} << 20;

  // Starts a journal in options.dir (created if missing) whose first record
  // is `next_lsn`. Segments already there must have been replayed and
  // removed (RemoveAll) first.
  static Result<std::unique_ptr<Journal>> Create(const Options& options, uint64_t next_lsn);
  // Syncs what was appended (unless kNo) and closes the files.
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Appends the batch's changes, deferrable ones left out, as one record:
  // *lsn is its number, or 0 when nothing was left to append. On failure
  // (a full disk) nothing is appended, the file is cut back to where it
  // was, and the next call may succeed. The record survives a crash of the
  // process once this returns, and a power cut once Sync has run.
  Status Append(const std::vector<Mutation>& batch, uint64_t* lsn);

  // fdatasyncs what was appended so far, sealed segments and the directory
  // included (everysec's timer; under always the writer, before each write
  // it makes to RocksDB). Any thread; one sync runs at a time. A sync
  // that fails for want of a descriptor may be tried again; one whose
  // fdatasync (or the directory's fsync) failed breaks the journal: every
  // later Sync and Append returns that failure, without touching the
  // files (Linux reports a failed writeback once, and a sync after it
  // "succeeds" whatever was lost).
  Status Sync();
  // Sync, unless a sync that finished meanwhile (waited for here) already
  // made record `lsn` durable. Any thread.
  Status SyncThrough(uint64_t lsn);
  // Append's thread: Sync, made here and now, unless another thread's sync
  // is under way; then it returns false and does nothing (that thread's
  // next sync covers what was appended). Under always the loop syncs a
  // lone command's record itself (LocalBackend), and the writer's sync of
  // it then finds it done.
  bool TrySyncHere(Status* st);
  // The number of the last record a Sync made durable (0: none). Any thread.
  uint64_t synced_lsn() const { return synced_lsn_.load(std::memory_order_acquire); }
  // How long each Sync took (kAlways: the syncs replies wait for).
  const SharedLatencyHistogram& syncs() const { return syncs_; }
  // Whether a sealed segment waits for a checkpoint to release it.
  bool HasSealed() const;
  // Deletes the sealed segments whose every record is at most `lsn` (the
  // store holds them on disk).
  void ReleaseThrough(uint64_t lsn);
  // The number of the last record appended (0: none yet). Append's thread.
  uint64_t last_lsn() const { return next_lsn_ - 1; }
  FsyncPolicy fsync() const { return options_.fsync; }
  // Bytes in the journal's files, sealed ones included.
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  // Calls `apply` for every record in `dir` numbered above `after`, in
  // order, and sets *last to the number of the last record (or `after`).
  // A record torn at the very end of the last segment (a crash in the
  // middle of an append: a prefix of it written, and nothing or zeros
  // after it) ends the journal; zeros after a segment's last record (a
  // preallocated segment) end that segment. A record that cannot be read
  // where a whole page (4 KB) reads as zeros, or records missing between
  // segments, end the journal there too (*cut says where) when no record
  // written after says a sync covered it: the part a power cut left
  // unwritten before it was synced (version 3 segments). Any other damage,
  // or a gap in the numbers, is kCorruption.
  static Status Replay(
      const std::string& dir, uint64_t after,
      const std::function<Status(uint64_t lsn, std::vector<Mutation>& batch)>& apply,
      uint64_t* last, JournalCut* cut = nullptr);
  // Deletes every segment in `dir`.
  static Status RemoveAll(const std::string& dir);

 private:
  struct Segment {
    uint64_t first_lsn;
    std::string path;
  };
  explicit Journal(const Options& options);
  Status OpenSegment(uint64_t first_lsn);  // mu_ held
  // Writes zeros from the end of the zeroed part to past `end`
  // (Options::preallocate); a failure leaves the appends to grow the file.
  void ZeroAhead(uint64_t end);

  Status SyncLocked(bool on_append_thread);  // sync_mu_ held
  // Ok, or why the journal takes nothing more (a sync failed).
  Status Broken() const;

  Options options_;
  int fd_ = -1;        // the open segment; changed under mu_ by Append only
  uint64_t size_ = 0;  // of the open segment's records (Append's thread)
  // The open segment's file length, never below size_ (Append's thread).
  uint64_t zeroed_ = 0;
  uint64_t next_lsn_ = 1;     // Append's thread
  bool cut_pending_ = false;  // a failed append is still to be cut off
  std::string buf_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> appended_lsn_{0};  // the last record appended
  std::atomic<uint64_t> synced_lsn_{0};
  // Set once, by the first sync that failed; broken_reason_ is written
  // before broken_ and never again.
  std::atomic<bool> broken_{false};
  std::string broken_reason_;
  SharedLatencyHistogram syncs_;

  std::mutex sync_mu_;  // held through a sync: one at a time
  mutable std::mutex mu_;
  std::vector<Segment> segments_;  // oldest first; the last is open
  std::vector<int> to_close_;      // sealed, not synced yet
  bool dir_dirty_ = false;         // a segment was created since the last Sync
};

}  // namespace delayq::store

#endif  // DELAYQ_STORE_JOURNAL_H_
