// The Local backend's named objects (local_backend.h; docs/storage.md,
// "Named objects"): a map on the loop thread, whose changes join the store's
// batches like the engine's mutations, so that a reply waits for the same
// durability as a put's, and an object's change and a job's made in one
// turn are written all or none.
#include "backend/local_backend.h"

namespace delayq::backend {

void LocalBackend::RecordObject(Mutation::Kind kind, ObjectKind object, std::string_view name,
                                std::string_view value) {
  object_versions_[static_cast<size_t>(object)]++;
  if (writer_ == nullptr) return;
  Collect();  // the engine's changes so far come first
  Mutation& m = open_batch_.emplace_back();
  m.kind = kind;
  m.object = StoredObject{object, std::string(name), std::string(value)};
  Collect();  // posts the flush
}

void LocalBackend::PutObject(ObjectKind kind, std::string_view name, std::string_view value,
                             Done done) {
  if (Status st = CheckObjectName(name); !st.ok()) return done(st);
  if (Status st = Writable(); !st.ok()) return done(st);
  objects_.insert_or_assign(std::pair{kind, std::string(name)}, std::string(value));
  RecordObject(Mutation::Kind::kPutObject, kind, name, value);
  // Answered once durable; an object's change counts no job operation's
  // outcome (CountOutcome passes over these operations).
  AfterChange(Op::kSetPush, SessionId{0}, std::move(done));
}

void LocalBackend::DeleteObject(ObjectKind kind, std::string_view name, Done done) {
  if (Status st = CheckObjectName(name); !st.ok()) return done(st);
  if (Status st = Writable(); !st.ok()) return done(st);
  auto it = objects_.find(std::pair{kind, std::string(name)});
  if (it == objects_.end())
    return done(Status::NotFound("no " + std::string(ObjectKindName(kind)) + " named " +
                                 std::string(name)));
  objects_.erase(it);
  RecordObject(Mutation::Kind::kDeleteObject, kind, name, {});
  AfterChange(Op::kDeletePush, SessionId{0}, std::move(done));
}

void LocalBackend::ListObjects(ObjectKind kind, Callback<std::vector<StoredObject>> done) {
  std::vector<StoredObject> out;
  for (auto it = objects_.lower_bound(std::pair{kind, std::string()});
       it != objects_.end() && it->first.first == kind; ++it)
    out.push_back(StoredObject{kind, it->first.second, it->second});
  done(std::move(out));
}

void LocalBackend::ObjectsVersion(ObjectKind kind, Callback<uint64_t> done) {
  done(object_versions_[static_cast<size_t>(kind)]);
}

}  // namespace delayq::backend
