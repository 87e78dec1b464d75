#include "store/record_codec.h"

#include <cstring>
#include <iterator>

namespace delayq::store {

void PutVarint(std::string* out, uint64_t v) {
  // Into a local first: one append, not a push_back (and its capacity
  // check) per byte.
  char bytes[10];
  size_t n = 0;
  while (v >= 0x80) {
    bytes[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  bytes[n++] = static_cast<char>(v);
  out->append(bytes, n);
}

namespace {

void PutBytes(std::string* out, std::string_view b) {
  PutVarint(out, b.size());
  out->append(b);
}
void PutBigEndian(std::string* out, uint64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (56 - 8 * i));
  out->append(bytes, 8);
}
uint64_t GetBigEndian(std::string_view s) {
  uint64_t v = 0;
  for (char c : s) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

// Reads fields from a value; any read past the end marks it bad.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  size_t left() const { return in_.size(); }

  uint8_t Byte() {
    if (in_.empty()) return Fail(), 0;
    uint8_t b = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return b;
  }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = Byte();
      if (!ok_) return 0;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return Fail(), 0;
  }
  uint32_t U32() {
    uint64_t v = Varint();
    if (v > UINT32_MAX) Fail();
    return static_cast<uint32_t>(v);
  }
  int64_t Signed() {
    uint64_t z = Varint();
    return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  std::string_view Bytes() {
    uint64_t n = Varint();
    if (!ok_ || n > in_.size()) return Fail(), std::string_view();
    std::string_view b = in_.substr(0, n);
    in_.remove_prefix(n);
    return b;
  }

 private:
  void Fail() { ok_ = false; }
  std::string_view in_;
  bool ok_ = true;
};

// Encodes a value's fields into a buffer on the stack, moved into the
// string when it fills, before a long byte string and at the end: a job's
// value takes two or three appends, not one (and its capacity check) a
// field. The bytes are those of PutVarint and friends.
class FieldWriter {
 public:
  explicit FieldWriter(std::string* out) : out_(out) {}
  FieldWriter(const FieldWriter&) = delete;
  FieldWriter& operator=(const FieldWriter&) = delete;

  void Byte(uint8_t b) {
    Room(1);
    *at_++ = static_cast<char>(b);
  }
  void Varint(uint64_t v) {
    Room(kMaxVarintBytes);
    while (v >= 0x80) {
      *at_++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *at_++ = static_cast<char>(v);
  }
  // Signed times as zigzag, so small negative values stay short.
  void Signed(int64_t v) {
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Bytes(std::string_view b) {
    Varint(b.size());
    if (b.size() <= static_cast<size_t>(std::end(buf_) - at_)) {
      std::memcpy(at_, b.data(), b.size());
      at_ += b.size();
    } else {
      Flush();
      out_->append(b);
    }
  }
  // Moves what the buffer holds into the string; call it last.
  void Flush() {
    out_->append(buf_, static_cast<size_t>(at_ - buf_));
    at_ = buf_;
  }

 private:
  static constexpr size_t kMaxVarintBytes = 10;
  void Room(size_t n) {
    if (static_cast<size_t>(std::end(buf_) - at_) < n) Flush();
  }
  std::string* out_;
  char buf_[256];
  char* at_ = buf_;
};

}  // namespace

void EncodeJobValue(const JobRecord& r, std::string_view body, std::string* out) {
  // Version 1 while a job has no flag: a job without a name reads the same
  // to a delayqd that knows version 1 only.
  const uint8_t flags = (r.named ? kRecordNamed : 0) | (r.answer ? kRecordAnswered : 0);
  FieldWriter w(out);
  w.Byte(r.answer ? 3 : flags != 0 ? 2 : 1);
  w.Varint(r.id);
  w.Bytes(r.topic);
  w.Bytes(r.key);
  w.Byte(static_cast<uint8_t>(r.state));
  w.Varint(r.priority);
  w.Signed(r.due_ms);
  w.Signed(r.created_ms);
  w.Signed(r.delay_ms);
  w.Signed(r.ttr_ms);
  for (uint32_t c : {r.reserves, r.timeouts, r.releases, r.buries, r.kicks, r.max_tries})
    w.Varint(c);
  w.Byte(static_cast<uint8_t>(r.backoff.kind));
  switch (r.backoff.kind) {
    case Backoff::Kind::kNone:
      break;
    case Backoff::Kind::kList:
      w.Varint(r.backoff.delays_ms.size());
      for (TimeMs d : r.backoff.delays_ms) w.Signed(d);
      break;
    case Backoff::Kind::kExponential:
      w.Signed(r.backoff.base_ms);
      w.Signed(r.backoff.cap_ms);
      break;
  }
  if (flags != 0) w.Byte(flags);
  if (r.answer) {
    w.Varint(r.answer->status);
    w.Bytes(std::string_view(r.answer->text).substr(0, kMaxAnswerBytes));
  }
  w.Bytes(body);
  w.Flush();
}

Status DecodeJobValue(std::string_view value, JobRecord* r, std::string_view* body) {
  Reader in(value);
  uint8_t version = in.Byte();
  if (!in.ok()) return Status::Corruption("empty job record");
  if (version == 0 || version > kRecordVersion) {
    return Status::InvalidArgument("job record version " + std::to_string(version) +
                                   " is newer than this delayqd reads (" +
                                   std::to_string(kRecordVersion) + ")");
  }
  // Field by field, not *r = JobRecord{}: a record decoded into again and
  // again (recovery) keeps its strings' buffers.
  r->id = in.Varint();
  r->topic.assign(in.Bytes());
  r->key.assign(in.Bytes());
  uint8_t state = in.Byte();
  r->priority = in.U32();
  r->due_ms = in.Signed();
  r->created_ms = in.Signed();
  r->delay_ms = in.Signed();
  r->ttr_ms = in.Signed();
  for (uint32_t* c :
       {&r->reserves, &r->timeouts, &r->releases, &r->buries, &r->kicks, &r->max_tries})
    *c = in.U32();
  uint8_t kind = in.Byte();
  if (!in.ok()) return Status::Corruption("truncated job record");
  if (state != static_cast<uint8_t>(JobState::kReady) &&
      state != static_cast<uint8_t>(JobState::kDelayed) &&
      state != static_cast<uint8_t>(JobState::kBuried))
    return Status::Corruption("job record with state " + std::to_string(state));
  r->state = static_cast<JobState>(state);
  r->backoff.kind = Backoff::Kind::kNone;
  r->backoff.delays_ms.clear();
  r->backoff.base_ms = r->backoff.cap_ms = 0;
  switch (kind) {
    case static_cast<uint8_t>(Backoff::Kind::kNone):
      break;
    case static_cast<uint8_t>(Backoff::Kind::kList): {
      uint64_t n = in.Varint();
      if (!in.ok() || n == 0 || n > 64) return Status::Corruption("bad back-off list");
      r->backoff.kind = Backoff::Kind::kList;
      for (uint64_t i = 0; i < n; ++i) r->backoff.delays_ms.push_back(in.Signed());
      break;
    }
    case static_cast<uint8_t>(Backoff::Kind::kExponential):
      r->backoff.kind = Backoff::Kind::kExponential;
      r->backoff.base_ms = in.Signed();
      r->backoff.cap_ms = in.Signed();
      break;
    default:
      return Status::Corruption("job record with back-off kind " + std::to_string(kind));
  }
  r->named = false;
  r->answer.reset();
  if (version >= 2) {
    uint8_t flags = in.Byte();
    if (!in.ok()) return Status::Corruption("truncated job record");
    const uint8_t known = version >= 3 ? kRecordNamed | kRecordAnswered : kRecordNamed;
    if ((flags & ~known) != 0)
      return Status::Corruption("job record with flags " + std::to_string(flags));
    r->named = (flags & kRecordNamed) != 0;
    if (r->named && r->key.empty()) return Status::Corruption("a named job record without a key");
    if ((flags & kRecordAnswered) != 0) {
      PushAnswer& a = r->answer.emplace();
      a.status = in.U32();
      std::string_view text = in.Bytes();
      if (!in.ok()) return Status::Corruption("truncated job record");
      if (text.size() > kMaxAnswerBytes) return Status::Corruption("job record with a long answer");
      a.text.assign(text);
    }
  }
  *body = in.Bytes();
  if (!in.ok()) return Status::Corruption("truncated job record");
  if (in.left() != 0) return Status::Corruption("job record with trailing bytes");
  if (r->id == 0) return Status::Corruption("job record with id 0");
  return Status::Ok();
}

void EncodeObjectValue(const StoredObject& o, std::string* out) {
  out->push_back(static_cast<char>(kObjectVersion));
  out->push_back(static_cast<char>(o.kind));
  PutBytes(out, o.name);
  PutBytes(out, o.value);
}

Status DecodeObjectValue(std::string_view value, StoredObject* o) {
  Reader in(value);
  uint8_t version = in.Byte();
  if (!in.ok()) return Status::Corruption("empty object record");
  if (version == 0 || version > kObjectVersion) {
    return Status::InvalidArgument("object record version " + std::to_string(version) +
                                   " is newer than this delayqd reads (" +
                                   std::to_string(kObjectVersion) + ")");
  }
  uint8_t kind = in.Byte();
  o->name.assign(in.Bytes());
  o->value.assign(in.Bytes());
  if (!in.ok()) return Status::Corruption("truncated object record");
  if (in.left() != 0) return Status::Corruption("bytes after an object record");
  if (kind == 0 || kind > kMaxObjectKind)
    return Status::Corruption("unknown object kind " + std::to_string(kind));
  if (o->name.empty()) return Status::Corruption("an object without a name");
  o->kind = static_cast<ObjectKind>(kind);
  return Status::Ok();
}

std::string ObjectKey(ObjectKind kind, std::string_view name) {
  std::string k(kObjectKeyPrefix);
  k.push_back(static_cast<char>(kind));
  k.append(name);
  return k;
}

std::string JobKey(JobId id) {
  std::string k;
  PutBigEndian(&k, id);
  return k;
}

std::string DueKey(std::string_view topic, TimeMs due, JobId id) {
  std::string k(topic);
  k.push_back('\0');                             // topics never contain NUL
  PutBigEndian(&k, static_cast<uint64_t>(due));  // due >= 0: sorts as unsigned
  PutBigEndian(&k, id);
  return k;
}

std::string UserKey(std::string_view topic, std::string_view key) {
  std::string k(topic);
  k.push_back('\0');  // topics never contain NUL
  k.append(key);
  return k;
}

bool ParseJobKey(std::string_view key, JobId* id) {
  if (key.size() != 8) return false;
  *id = GetBigEndian(key);
  return true;
}

bool ParseDueKey(std::string_view key, std::string_view* topic, TimeMs* due, JobId* id) {
  if (key.size() < 18 || key[key.size() - 17] != '\0') return false;
  *topic = key.substr(0, key.size() - 17);
  *due = static_cast<TimeMs>(GetBigEndian(key.substr(key.size() - 16, 8)));
  *id = GetBigEndian(key.substr(key.size() - 8));
  return true;
}

}  // namespace delayq::store
