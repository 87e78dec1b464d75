// Durability behind one interface (docs/storage.md). A store applies the
// engine's mutations (and the named objects' changes, in the same batches)
// in order and loads the jobs and the objects back at start.
//
// Thread: a store is written by one thread at a time (the writer thread of
// the Local backend, or the loop thread at recovery); the reads of the
// horizon may run on one other thread meanwhile.
#ifndef DELAYQ_STORE_STORE_H_
#define DELAYQ_STORE_STORE_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/histogram.h"
#include "delayq/status.h"
#include "delayq/types.h"

namespace delayq::store {

// What a change survives once Apply returns (Redis's names):
//  kAlways   - a power cut: the log is fsynced before Apply returns;
//  kEverySec - a crash of the process; a power cut loses at most ~1 s;
//  kNo       - a crash of the process; the OS decides when data hits disk.
enum class FsyncPolicy : uint8_t { kAlways, kEverySec, kNo };

// What a store counts for /metrics (docs/operations.md, "Metrics").
struct StoreSample {
  // How long each sync of the store's log took: under kAlways each write
  // with its sync (one call), under kEverySec each once-a-second sync;
  // none under kNo or in memory.
  LatencyHistogram sync;
  // Bytes of the store's files on disk (its journal's included); 0 in
  // memory.
  uint64_t disk_bytes = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // Applies the mutations in order, all or none. Returns kUnavailable when
  // the disk refuses (full, failing); nothing of the batch is applied then.
  virtual Status Apply(const std::vector<Mutation>& batch) = 0;
  // As Apply, for a batch that holds the journal's records up to
  // `journal_lsn` (0: none): a store under a journal records the number
  // with the batch, so that a start replays only what follows it. The
  // caller gives the batch up once it is applied: the store may then have
  // moved the bodies out of it (after an error it is as it was).
  virtual Status ApplyThrough(std::vector<Mutation>& batch, uint64_t journal_lsn) {
    (void)journal_lsn;
    return Apply(batch);
  }

  // Calls `job` for every stored job (in id order), then returns the
  // highest id ever handed out (0 for an empty store). Stops at the first
  // error `job` returns, or at damaged data (kCorruption).
  virtual Status Load(const std::function<Status(const JobRecord&, std::string_view body)>& job,
                      JobId* max_id) = 0;

  // Calls `object` for every stored named object (kPutObject), by kind,
  // then name. Stops at the first error `object` returns, or at damaged
  // data (kCorruption).
  virtual Status LoadObjects(const std::function<Status(const StoredObject&)>& object) = 0;

  // Records, durably (synced unless the policy is `no`), that ids up to
  // `id` may be handed out: Load's max_id is not below it again until a
  // lower one is recorded (the backend's at a clean stop, the last id it
  // handed out), so no id is used twice, not even one of a put a power cut
  // took back. Any thread, beside the writer's Apply.
  virtual Status NoteMaxId(JobId id) = 0;

  // About how many jobs are stored (for recovery's progress); 0: unknown.
  virtual uint64_t ApproximateJobs() const { return 0; }

  // Its figures for /metrics now. Thread: any (the loop thread's scrape
  // while the writer writes); it reads the disk (a directory's listing).
  virtual StoreSample Sample() const { return {}; }

  // ---- Reads of the horizon (docs/storage.md, "The horizon") ------------
  // These run on the loop thread while the writer thread may be in Apply;
  // they see the store as some Apply left it.

  // kNotFound when the store holds no job `id`.
  virtual Status GetJob(JobId id, JobRecord* record, std::string* body) = 0;
  // kNotFound when no stored job of `topic` has `key`. The topic "" (no
  // topic is empty) holds the names of named jobs (JobRecord::named).
  virtual Status FindKey(std::string_view topic, std::string_view key, JobId* id) = 0;
  // Visits the stored delayed jobs of `topic` after `after` in (due, id)
  // order, while their due time is at most `through`, until `visit`
  // returns false.
  virtual Status ScanDue(std::string_view topic, DueMark after, TimeMs through,
                         const std::function<bool(DueMark)>& visit) = 0;
};

}  // namespace delayq::store

#endif  // DELAYQ_STORE_STORE_H_
