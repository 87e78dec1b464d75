// The Redis backend's named objects (redis_backend.h; docs/redis-backend.md,
// "Named objects"): `dq:{dq}:object:<kind>` holds name -> value, and
// `dq:{dq}:objects` each kind's version, changed together by dq_object. One
// slot for all of them: a handful of settings, read by every instance.
#include <hiredis/hiredis.h>

#include <algorithm>

#include "backend/redis_backend.h"
#include "backend/redis_backend_internal.h"

namespace delayq::backend {

namespace {

std::string ObjectHash(ObjectKind kind) {
  return "dq:{dq}:object:" + std::string(ObjectKindName(kind));
}

}  // namespace

void RedisBackend::PutObject(ObjectKind kind, std::string_view name, std::string_view value,
                             Done done) {
  if (Status st = CheckObjectName(name); !st.ok()) return done(st);
  RunRaw(Script::kObject, {ObjectHash(kind), object_versions_},
         {"s", std::string(ObjectKindName(kind)), std::string(name), std::string(value)},
         [done = std::move(done)](Status st, const redisReply*) { done(st); });
}

void RedisBackend::DeleteObject(ObjectKind kind, std::string_view name, Done done) {
  if (Status st = CheckObjectName(name); !st.ok()) return done(st);
  RunRaw(Script::kObject, {ObjectHash(kind), object_versions_},
         {"d", std::string(ObjectKindName(kind)), std::string(name)},
         [done = std::move(done), kind, name = std::string(name)](Status st, const redisReply* r) {
           if (st.ok() && Int(r) == 0)
             st = Status::NotFound("no " + std::string(ObjectKindName(kind)) + " named " + name);
           done(st);
         });
}

void RedisBackend::ListObjects(ObjectKind kind, Callback<std::vector<StoredObject>> done) {
  std::string key = ObjectHash(kind);
  router_->Command(key, {"HGETALL", key}, [this, kind, done](const redisReply* r) {
    if (r == nullptr || r->type != REDIS_REPLY_ARRAY)
      return done(Status::Unavailable(
          "redis " + router_->address() + ": " +
          (r != nullptr && r->type == REDIS_REPLY_ERROR ? std::string(Str(r)) : "not connected")));
    std::vector<StoredObject> out;
    out.reserve(Size(r) / 2);
    for (size_t i = 0; i + 1 < Size(r); i += 2)
      out.push_back(StoredObject{kind, std::string(Str(At(r, i))), std::string(Str(At(r, i + 1)))});
    std::sort(out.begin(), out.end(),
              [](const StoredObject& a, const StoredObject& b) { return a.name < b.name; });
    done(std::move(out));
  });
}

void RedisBackend::ObjectsVersion(ObjectKind kind, Callback<uint64_t> done) {
  router_->Command(
      object_versions_, {"HGET", object_versions_, ObjectKindName(kind)},
      [this, done](const redisReply* r) {
        if (r == nullptr || r->type == REDIS_REPLY_ERROR)
          return done(Status::Unavailable("redis " + router_->address() + ": " +
                                          (r != nullptr ? std::string(Str(r)) : "not connected")));
        done(static_cast<uint64_t>(Int(r)));
      });
}

}  // namespace delayq::backend
