#include "store/writer.h"

#include <pthread.h>

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace delayq::store {
namespace {
// How long the destructor keeps trying a failing store before it gives up
// on what it still holds (those changes were never acknowledged).
constexpr auto kGiveUpAfter = std::chrono::seconds(5);
// At most this many deferrable changes are held back at once.
constexpr size_t kMaxHeld = 65'536;
}  // namespace

Writer::Writer(Store& store, Health on_health, std::chrono::milliseconds retry_interval,
               std::chrono::milliseconds hold_for, std::chrono::milliseconds batch_window,
               std::chrono::milliseconds durable_window)
    : store_(store),
      on_health_(std::move(on_health)),
      retry_interval_(retry_interval),
      hold_for_(hold_for),
      batch_window_(batch_window),
      durable_window_(durable_window),
      thread_([this] { Loop(); }) {}

Writer::~Writer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Writer::Submit(std::vector<Mutation> batch, Applied applied, uint64_t journal_lsn,
                    bool durable) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The first batch wakes the writer; so does the first that is not
    // durable, which ends a durable_window wait.
    wake = queue_.empty() || (queue_durable_ && !durable);
    if (queue_.empty()) queue_durable_ = true;
    queue_durable_ &= durable;
    queue_.push_back(Item{std::move(batch), std::move(applied), journal_lsn});
  }
  if (wake) cv_.notify_one();
}

void Writer::Loop() {
  pthread_setname_np(pthread_self(), "delayq-writer");  // as `top -H` shows it
  std::vector<Mutation> kept;  // written by no successful Apply yet, in order
  // Deferrable changes held back, in order; a later change of the same job
  // replaces one (its id becomes 0). held_at: job -> its live entry.
  std::vector<Mutation> held;
  std::unordered_map<JobId, size_t> held_at;
  Clock::time_point held_since{};
  std::deque<Item> taken;
  uint64_t journal_lsn = 0;  // the last journal record in what was taken
  bool failing = false;
  Clock::time_point give_up{};
  auto work = [&] { return stop_ || !queue_.empty(); };
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (failing) {
      cv_.wait_for(lock, retry_interval_);  // then try again, with what came
    } else if (!held_at.empty()) {
      cv_.wait_until(lock, held_since + hold_for_, work);
    } else {
      cv_.wait(lock, work);
      if (stop_ && queue_.empty()) return;
    }
    if (batch_window_.count() > 0 && !failing && !stop_ && !queue_.empty())
      cv_.wait_for(lock, batch_window_, [&] { return stop_; });
    else if (durable_window_.count() > 0 && !failing && !stop_ && !queue_.empty() && queue_durable_)
      cv_.wait_for(lock, durable_window_, [&] { return stop_ || !queue_durable_; });
    Clock::time_point now = Clock::now();
    if (stop_ && failing) {
      if (give_up == Clock::time_point{}) give_up = now + kGiveUpAfter;
      if (now >= give_up) return;
    }
    taken.swap(queue_);
    lock.unlock();

    // Group commit: one write for every batch handed over since the last.
    for (Item& it : taken) {
      journal_lsn = std::max(journal_lsn, it.journal_lsn);
      for (Mutation& m : it.batch) {
        if (auto h = held_at.find(m.record.id); h != held_at.end()) {
          held[h->second].record.id = 0;  // this change repeats it
          held_at.erase(h);
        }
        if (!m.deferrable) {
          kept.push_back(std::move(m));
          continue;
        }
        if (held_at.empty()) {
          held.clear();
          held_since = now;
        }
        held_at[m.record.id] = held.size();
        held.push_back(std::move(m));
      }
    }
    if (!held_at.empty() && (stop_ || held.size() >= kMaxHeld || now >= held_since + hold_for_)) {
      // Last, after changes of other jobs handed over later: a deferrable
      // change touches only its own job's entries.
      for (Mutation& m : held)
        if (m.record.id != 0) kept.push_back(std::move(m));
      held.clear();
      held_at.clear();
    }
    Status st = kept.empty() ? Status::Ok() : store_.ApplyThrough(kept, journal_lsn);
    if (st.ok()) {
      kept.clear();
      if (failing) {
        failing = false;
        if (on_health_) on_health_(true, st);
      }
    } else {
      write_errors_.fetch_add(1, std::memory_order_relaxed);
      if (!failing) {
        failing = true;  // `kept` stays, and is written first when it works
        if (on_health_) on_health_(false, st);
      }
    }
    for (Item& it : taken)
      if (it.applied) it.applied(st);
    taken.clear();
    lock.lock();
    if (stop_ && !failing && held_at.empty() && queue_.empty()) return;
  }
}

}  // namespace delayq::store
