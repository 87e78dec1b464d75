#include "store/writer.h"

#include <utility>

namespace delayq::store {
namespace {
// How long the destructor keeps trying a failing store before it gives up
// on what it still holds (those changes were never acknowledged).
constexpr auto kGiveUpAfter = std::chrono::seconds(5);
}  // namespace

Writer::Writer(Store& store, Health on_health, std::chrono::milliseconds retry_interval)
    : store_(store),
      on_health_(std::move(on_health)),
      retry_interval_(retry_interval),
      thread_([this] { Loop(); }) {}

Writer::~Writer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Writer::Submit(std::vector<Mutation> batch, Applied applied) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake = queue_.empty();
    queue_.push_back(Item{std::move(batch), std::move(applied)});
  }
  if (wake) cv_.notify_one();
}

void Writer::Loop() {
  std::vector<Mutation> kept;  // written by no successful Apply yet, in order
  std::deque<Item> taken;
  bool failing = false;
  std::chrono::steady_clock::time_point give_up{};
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (failing) {
      cv_.wait_for(lock, retry_interval_);  // then try again, with what came
    } else {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_ && queue_.empty()) return;
    }
    if (stop_ && failing) {
      auto now = std::chrono::steady_clock::now();
      if (give_up == std::chrono::steady_clock::time_point{}) give_up = now + kGiveUpAfter;
      if (now >= give_up) return;
    }
    taken.swap(queue_);
    lock.unlock();

    // Group commit: one write for every batch handed over since the last.
    for (Item& it : taken) {
      kept.insert(kept.end(), std::make_move_iterator(it.batch.begin()),
                  std::make_move_iterator(it.batch.end()));
    }
    Status st = kept.empty() ? Status::Ok() : store_.Apply(kept);
    if (st.ok()) {
      kept.clear();
      if (failing) {
        failing = false;
        if (on_health_) on_health_(true, st);
      }
    } else if (!failing) {
      failing = true;  // `kept` stays, and is written first when it works
      if (on_health_) on_health_(false, st);
    }
    for (Item& it : taken)
      if (it.applied) it.applied(st);
    taken.clear();
    lock.lock();
    if (stop_ && !failing && queue_.empty()) return;
  }
}

}  // namespace delayq::store
