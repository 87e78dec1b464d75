// The push targets kept with the queue (push_store.h).
#include "delivery/push_store.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace delayq::delivery {

PushTargetStore::PushTargetStore(boost::asio::io_context& io, backend::Backend& backend,
                                 PushTargets& targets, Options options)
    : backend_(backend), targets_(targets), options_(std::move(options)), timer_(io) {
  targets_.set_persist([this, alive = alive_](std::string_view topic, const PushTarget* t,
                                              std::function<void(Status)> done) {
    if (!*alive) return done(Status::Unavailable("delayqd is stopping"));
    if (t != nullptr)
      return backend_.PutObject(ObjectKind::kPush, topic, StoredJson(*t), std::move(done));
    // Ended elsewhere already: ended here too.
    backend_.DeleteObject(ObjectKind::kPush, topic, [done = std::move(done)](Status st) {
      done(st.code() == Code::kNotFound ? Status::Ok() : st);
    });
  });
}

PushTargetStore::~PushTargetStore() {
  *alive_ = false;
  timer_.cancel();
}

void PushTargetStore::Start(std::function<void(Status)> loaded) {
  backend_.ObjectsVersion(ObjectKind::kPush, [this, alive = alive_, loaded = std::move(loaded)](
                                                 Result<uint64_t> v) mutable {
    if (!*alive) return;
    if (v.ok()) version_ = *v;
    Load([this, loaded = std::move(loaded)](Status st) {
      if (loaded) loaded(st);
      Arm();
    });
  });
}

void PushTargetStore::Arm() {
  timer_.expires_after(options_.poll);
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    Poll();
  });
}

void PushTargetStore::Poll() {
  backend_.ObjectsVersion(ObjectKind::kPush, [this, alive = alive_](Result<uint64_t> v) {
    if (!*alive) return;
    if (!v.ok() || *v == version_) return Arm();
    version_ = *v;
    Load([this](Status) { Arm(); });
  });
}

void PushTargetStore::Load(std::function<void(Status)> then) {
  backend_.ListObjects(ObjectKind::kPush, [this, alive = alive_, then = std::move(then)](
                                              Result<std::vector<StoredObject>> objects) {
    if (!*alive) return;
    if (!objects.ok()) {
      if (options_.log)
        options_.log("event=push_targets_unreadable error=\"" + objects.status().message() + "\"");
      return then(objects.status());
    }
    std::set<std::string, std::less<>> stored;
    for (const StoredObject& o : *objects) {
      auto t = ParsePushTarget(o.name, o.value);
      if (!t.ok()) {
        if (options_.log)
          options_.log("event=push_target_unreadable topic=" + o.name + " error=\"" +
                       t.status().message() + "\"");
        continue;
      }
      stored.insert(o.name);
      targets_.Set(*std::move(t));
    }
    std::vector<std::string> gone;
    for (const auto& [topic, t] : targets_.all())
      if (!stored.contains(topic)) gone.push_back(topic);
    for (const std::string& topic : gone) targets_.Remove(topic);
    then(Status::Ok());
  });
}

}  // namespace delayq::delivery
