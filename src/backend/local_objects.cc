// The Local backend's named objects (local_backend.h; docs/storage.md,
// "Named objects"): a map on the loop thread, whose changes join the store's
// batches like the engine's mutations, so that a reply waits for the same
// durability as a put's, and an object's change and a job's made in one
// turn are written all or none.
#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "backend/local_backend.h"

namespace delayq::backend {

void LocalBackend::RecordObject(Mutation::Kind kind, ObjectKind object, std::string_view name,
                                std::string_view value) {
  object_versions_[static_cast<size_t>(object)]++;
  if (writer_ == nullptr) return;
  // After the engine's changes so far: it appends them to open_batch_.
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
  // (The row of the operation that puts such an object; rows that
  // operation_outcomes() does not count.)
  AfterChange(kind == ObjectKind::kPush ? Op::kSetPush : Op::kPutSchedule, 0, std::move(done));
}

void LocalBackend::DeleteObject(ObjectKind kind, std::string_view name, Done done) {
  if (Status st = CheckObjectName(name); !st.ok()) return done(st);
  if (Status st = Writable(); !st.ok()) return done(st);
  const Op op = kind == ObjectKind::kPush ? Op::kDeletePush : Op::kDeleteSchedule;
  auto it = objects_.find(std::pair{kind, std::string(name)});
  if (it == objects_.end()) {
    // Perhaps deleted by another client, not durably yet: answered when
    // that is.
    return AfterChange(op, 0, std::move(done),
                       Status::NotFound("no " + std::string(ObjectKindName(kind)) + " named " +
                                        std::string(name)));
  }
  objects_.erase(it);
  RecordObject(Mutation::Kind::kDeleteObject, kind, name, {});
  AfterChange(op, 0, std::move(done));
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

namespace {

// A schedule's cursor as stored: "<fire_ms> <revision> <before>", or a
// bare "<fire_ms>" (backend.h, FireSchedule).
struct Cursor {
  TimeMs at = -1;
  std::string_view revision;
  TimeMs before = -1;
};

Cursor ParseCursor(std::string_view v) {
  Cursor c;
  const char* p = v.data();
  const char* end = p + v.size();
  auto [a, ea] = std::from_chars(p, end, c.at);
  if (ea != std::errc()) return Cursor{};
  if (a == end || *a != ' ') return c;
  const char* rev = a + 1;
  const char* sp = std::find(rev, end, ' ');
  c.revision = std::string_view(rev, static_cast<size_t>(sp - rev));
  if (sp != end) std::from_chars(sp + 1, end, c.before);
  return c;
}

}  // namespace

void LocalBackend::FireSchedule(std::string_view schedule, TimeMs fire_ms,
                                std::string_view revision, const PutRequest& r,
                                Callback<PutResult> done) {
  // A firing is a put, counted as one whatever its outcome (as a Redis
  // backend's are, by CountingBackend).
  if (Status st = CheckObjectName(schedule); !st.ok()) return Answer(Op::kPut, done, st);
  if (Status w = Admit(Op::kPut); !w.ok()) return Answer(Op::kPut, done, std::move(w));
  TimeMs last = -1;
  auto cursor = objects_.find(std::pair{ObjectKind::kScheduleCursor, std::string(schedule)});
  if (cursor != objects_.end()) {
    last = ParseCursor(cursor->second).at;
    if (last >= fire_ms)
      return Answer(Op::kPut, done,
                    Status::Conflict("schedule " + std::string(schedule) + " fired at " +
                                     std::to_string(fire_ms) + " already"));
  }
  if (Status w = WarmKey(r.topic, r.key); !w.ok()) return Answer(Op::kPut, done, std::move(w));
  Result<PutResult> res = engine_.Put(EngineNow(), 0, r);
  if (res.ok()) {
    // The put's mutations are taken first: the cursor joins the same batch.
    std::string at = std::to_string(fire_ms);
    at += ' ';
    at += revision;
    at += ' ';
    at += std::to_string(last);
    objects_.insert_or_assign(std::pair{ObjectKind::kScheduleCursor, std::string(schedule)}, at);
    RecordObject(Mutation::Kind::kPutObject, ObjectKind::kScheduleCursor, schedule, at);
  }
  FinishChange<PutResult>(Op::kPut, 0, std::move(res), std::move(done));
}

void LocalBackend::UnfireSchedule(std::string_view schedule, std::string_view topic, TimeMs fire_ms,
                                  std::string_view revision, std::string_view key,
                                  Callback<bool> done) {
  if (Status st = CheckObjectName(schedule); !st.ok()) return done(st);
  if (Status w = Admit(Op::kDeleteKey); !w.ok()) return done(std::move(w));
  auto cursor = objects_.find(std::pair{ObjectKind::kScheduleCursor, std::string(schedule)});
  if (cursor == objects_.end()) return done(false);
  const Cursor c = ParseCursor(cursor->second);
  if (c.at != fire_ms || c.revision != revision || revision.empty() || Now() >= fire_ms)
    return done(false);
  if (Status w = WarmKey(topic, key); !w.ok()) return done(std::move(w));
  const TimeUs now = EngineNow();
  auto job = engine_.PeekByKey(now, topic, key);
  if (!job.ok() || job->state != JobState::kDelayed) return done(false);
  Result<JobChange> gone = engine_.DeleteByKey(now, Holder(), topic, key);
  if (!gone.ok()) return done(false);
  // The delete's mutations are taken first: the cursor joins its batch.
  if (c.before < 0) {
    objects_.erase(cursor);
    RecordObject(Mutation::Kind::kDeleteObject, ObjectKind::kScheduleCursor, schedule, {});
  } else {
    std::string before = std::to_string(c.before);
    cursor->second = before;
    RecordObject(Mutation::Kind::kPutObject, ObjectKind::kScheduleCursor, schedule, before);
  }
  FinishChange<JobChange>(Op::kDeleteKey, 0, std::move(gone),
                          [done = std::move(done)](Result<JobChange> r) {
                            if (!r.ok()) return done(r.status());
                            done(true);
                          });
}

}  // namespace delayq::backend
