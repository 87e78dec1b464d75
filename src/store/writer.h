// Group commit (docs/storage.md): the loop thread hands batches of engine
// mutations to one writer thread, which applies everything handed over
// since its last write in one Store::Apply (one log write, one fsync under
// `always`), then reports each batch's outcome.
//
// When a write fails (disk full, I/O error) nothing handed over is dropped:
// the writer keeps every batch from the failed one on, in order, reports
// each as failed, and tries them again every `retry_interval` until the
// store takes them; `on_health` tells when that starts and ends.
//
// A deferrable change (Mutation::deferrable: a reserve's counters) is held
// back for up to `hold_for` and dropped if a later change of the same job
// comes first, since that one carries the counters too: most reserved jobs
// are finished within the moment, and their reserve then costs no write.
// Its batch is reported applied without it; a crash meanwhile loses only
// those counters (the job itself comes back ready, as after any crash).
//
// Thread: Submit from any one thread; callbacks run on the writer thread.
#ifndef DELAYQ_STORE_WRITER_H_
#define DELAYQ_STORE_WRITER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "store/store.h"

namespace delayq::store {

class Writer {
 public:
  using Applied = std::function<void(Status)>;
  // ok=false with the store's error when writes start failing; ok=true
  // when the kept batches were written after all.
  using Health = std::function<void(bool ok, const Status& error)>;

  // batch_window: once woken by a batch, wait this long for more before
  // writing (0: write at once). Under a journal no reply waits for the
  // writer, and a longer window lets more jobs be put and deleted within
  // one write, which then stores nothing of them. While every batch
  // handed over is `durable` (Submit), the writer waits that long even
  // when batch_window is 0, until a batch that is not comes.
  Writer(Store& store, Health on_health,
         std::chrono::milliseconds retry_interval = std::chrono::milliseconds(200),
         std::chrono::milliseconds hold_for = std::chrono::seconds(1),
         std::chrono::milliseconds batch_window = std::chrono::milliseconds(0),
         std::chrono::milliseconds durable_window = std::chrono::milliseconds(0));
  // Writes what was handed over, held changes included (trying a failing
  // store for up to five seconds more), then stops the thread.
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Hands over a batch; `applied` runs once the store holds it (Ok), or at
  // once with the error while writes fail (the batch is kept and retried).
  // journal_lsn: the journal record that holds the batch (0: none).
  // durable: its journal record is synced already (no reply waits for this
  // write), so it may wait out durable_window for company.
  void Submit(std::vector<Mutation> batch, Applied applied, uint64_t journal_lsn = 0,
              bool durable = false);

  // Writes the store refused so far (each retry that failed counts).
  // Thread: any.
  uint64_t write_errors() const { return write_errors_.load(std::memory_order_relaxed); }

 private:
  struct Item {
    std::vector<Mutation> batch;
    Applied applied;
    uint64_t journal_lsn;
  };
  using Clock = std::chrono::steady_clock;
  void Loop();

  Store& store_;
  Health on_health_;
  std::chrono::milliseconds retry_interval_;
  std::chrono::milliseconds hold_for_;
  std::chrono::milliseconds batch_window_;
  std::chrono::milliseconds durable_window_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool queue_durable_ = true;  // every batch in queue_ was submitted durable
  bool stop_ = false;
  std::atomic<uint64_t> write_errors_{0};
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace delayq::store

#endif  // DELAYQ_STORE_WRITER_H_
