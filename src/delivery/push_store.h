// The push targets kept with the queue (docs/push.md, "Where targets
// live"): PushTargetStore backs a PushTargets with the backend's named
// objects (ObjectKind::kPush, named by topic, valued by StoredJson), so a
// target survives a restart and, on Redis, every instance learns of a
// target set or ended on another. A change through PUT or DELETE is
// written first and takes effect here once it is durable; the others'
// changes come by polling ObjectsVersion (a cheap call) and listing the
// targets again only when it moved.
//
// Thread: the loop thread of the io_context and the backend.
#ifndef DELAYQ_DELIVERY_PUSH_STORE_H_
#define DELAYQ_DELIVERY_PUSH_STORE_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "backend/backend.h"
#include "delivery/push_target.h"

namespace delayq::delivery {

class PushTargetStore {
 public:
  struct Options {
    // How often the store is asked whether targets changed elsewhere.
    std::chrono::milliseconds poll{1000};
    // Where a stored target that no longer parses, or a failed poll, is
    // told (delayqd: its log). Empty: nowhere.
    std::function<void(std::string_view)> log;
  };
  // `backend` and `targets` must outlive this. Sets `targets`' persistence.
  PushTargetStore(boost::asio::io_context& io, backend::Backend& backend, PushTargets& targets,
                  Options options);
  ~PushTargetStore();
  PushTargetStore(const PushTargetStore&) = delete;
  PushTargetStore& operator=(const PushTargetStore&) = delete;

  // Loads the stored targets into `targets`, then polls. `loaded` runs
  // once, after the first load (its status: the listing's).
  void Start(std::function<void(Status)> loaded = {});

 private:
  void Poll();
  void Load(std::function<void(Status)> then);
  void Arm();

  backend::Backend& backend_;
  PushTargets& targets_;
  Options options_;
  boost::asio::steady_timer timer_;
  uint64_t version_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_PUSH_STORE_H_
