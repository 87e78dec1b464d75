#include "store/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "store/record_codec.h"

namespace delayq::store {

uint32_t JournalCrc32cPortable(std::string_view data) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

namespace {
#if defined(__x86_64__)
// The same CRC with SSE 4.2's crc32 instruction, 8 bytes at a time (the
// table-driven one took 6% of the loop thread's time per job).
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(std::string_view data) {
  uint64_t crc = 0xFFFFFFFF;
  const char* p = data.data();
  size_t n = data.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc = __builtin_ia32_crc32di(crc, word);
  }
  uint32_t c = static_cast<uint32_t>(crc);
  for (; n > 0; ++p, --n) c = __builtin_ia32_crc32qi(c, static_cast<unsigned char>(*p));
  return ~c;
}
#endif
}  // namespace

uint32_t JournalCrc32c(std::string_view data) {
#if defined(__x86_64__)
  static const bool sse42 = __builtin_cpu_supports("sse4.2");
  if (sse42) return Crc32cSse42(data);
#endif
  return JournalCrc32cPortable(data);
}

namespace {

namespace fs = std::filesystem;

// A segment starts with the magic and the format version (8 bytes); since
// version 3 then the size at which it is sealed (8 bytes, little endian)
// and the CRC-32C of those 16 bytes (4): a sealed segment whose records end
// below that size lost its end (Replay).
constexpr char kMagic[7] = {'d', 'q', 'j', 'r', 'n', 'l', '\n'};
constexpr size_t kHeaderBytesV2 = 8;
constexpr size_t kHeaderBytes = 20;
// A record: the payload's length, the CRC-32C of those 4 bytes, the
// CRC-32C of the payload (4 bytes each, little endian), then the payload:
// the record number (8 bytes, little endian), since version 3 the number
// of the last record synced when it was appended (8 bytes, little
// endian), the count of changes
// (varint), and per change its kind (1 byte) and the job's value (its
// length in 4 bytes, little endian, then EncodeJobValue's bytes; a named
// object's change carries EncodeObjectValue's bytes instead). The
// length has its own checksum so that a damaged length is told from an
// append cut short.
constexpr size_t kRecordHeaderBytes = 12;
// No batch comes near this; a larger length is damage.
constexpr uint32_t kMaxRecordBytes = uint32_t{1} << 30;
// What a power cut leaves unwritten comes in whole pages.
constexpr size_t kPageBytes = 4096;
// The first version whose records say what was synced.
constexpr uint8_t kVersionWithSynced = 3;

void PutFixed64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void SetFixed32(char* at, uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<char>(v >> (8 * i));
}
uint64_t GetFixed(std::string_view s, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(s[i])) << (8 * i);
  return v;
}
bool GetVarint(std::string_view* in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    uint8_t b = static_cast<uint8_t>((*in)[0]);
    in->remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

std::string SegmentName(uint64_t first_lsn) {
  char name[32];
  std::snprintf(name, sizeof name, "%020llu.jnl", static_cast<unsigned long long>(first_lsn));
  return name;
}

Status Errno(const std::string& what) {
  int e = errno;
  std::string msg = what + ": " + std::strerror(e);
  if (e == EINVAL || e == EBADF) return Status::Internal(msg);
  return Status::Unavailable(msg);
}

Status WriteAll(int fd, const char* data, size_t n, uint64_t at,
                ssize_t (*write_at)(int, const void*, size_t, off_t) = ::pwrite) {
  while (n > 0) {
    ssize_t w = write_at(fd, data, n, static_cast<off_t>(at));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("appending to the journal");
    }
    data += w;
    at += static_cast<uint64_t>(w);
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Whether every byte of `s` from `from` on is zero (none: true).
bool ZerosFrom(std::string_view s, size_t from) {
  if (from >= s.size()) return true;
  return std::all_of(s.begin() + static_cast<ptrdiff_t>(from), s.end(),
                     [](char c) { return c == '\0'; });
}

// *synced_not: the fsync itself failed (not the open).
Status SyncDir(const std::string& dir, bool* synced_not = nullptr) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("opening " + dir);
  Status st = ::fsync(fd) == 0 ? Status::Ok() : Errno("syncing " + dir);
  if (!st.ok() && synced_not != nullptr) *synced_not = true;
  ::close(fd);
  return st;
}

// The segments in `dir`, oldest first (by the number in their names).
Status ListSegments(const std::string& dir, std::vector<std::pair<uint64_t, std::string>>* out) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::Ok();
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() != 24 || name.substr(20) != ".jnl") continue;
    if (!std::all_of(name.begin(), name.begin() + 20, [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    out->emplace_back(std::stoull(name.substr(0, 20)), entry.path().string());
  }
  if (ec) return Status::Unavailable("listing the journal in " + dir + ": " + ec.message());
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

Status ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Unavailable("opening " + path + ": " + std::strerror(errno));
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::Unavailable("reading " + path);
  return Status::Ok();
}

// The payload's numbers: its own and (version 3 on) the last one synced
// when it was appended (0 before version 3). False: too short.
bool DecodeNumbers(std::string_view* payload, uint8_t version, uint64_t* lsn, uint64_t* synced) {
  const size_t n = version >= kVersionWithSynced ? 16 : 8;
  if (payload->size() < n) return false;
  *lsn = GetFixed(*payload, 8);
  *synced = n == 16 ? GetFixed(payload->substr(8), 8) : 0;
  payload->remove_prefix(n);
  return true;
}

Status DecodeRecord(std::string_view payload, uint8_t version, uint64_t* lsn, uint64_t* synced,
                    std::vector<Mutation>* batch) {
  if (!DecodeNumbers(&payload, version, lsn, synced))
    return Status::Corruption("record shorter than its numbers");
  uint64_t n = 0;
  if (!GetVarint(&payload, &n) || n > payload.size())
    return Status::Corruption("bad count of changes");
  batch->clear();
  batch->reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (payload.empty()) return Status::Corruption("record ends inside a change");
    uint8_t kind = static_cast<uint8_t>(payload[0]);
    payload.remove_prefix(1);
    if (kind > static_cast<uint8_t>(Mutation::Kind::kDeleteObject) || payload.size() < 4)
      return Status::Corruption("bad change");
    uint64_t len = GetFixed(payload, 4);
    payload.remove_prefix(4);
    if (len > payload.size()) return Status::Corruption("a change runs past its record");
    Mutation& m = batch->emplace_back();
    m.kind = static_cast<Mutation::Kind>(kind);
    if (m.is_object()) {
      if (Status st = DecodeObjectValue(payload.substr(0, len), &m.object); !st.ok()) return st;
      payload.remove_prefix(len);
      continue;
    }
    std::string_view body;
    if (Status st = DecodeJobValue(payload.substr(0, len), &m.record, &body); !st.ok()) return st;
    m.body = std::string(body);
    payload.remove_prefix(len);
  }
  if (!payload.empty()) return Status::Corruption("bytes after the last change");
  return Status::Ok();
}

// Whether the record at `at` of a segment of `version` reads whole (both
// checksums; its changes are not decoded): its extent, its number and the
// last record synced when it was appended.
bool RecordAt(std::string_view data, size_t at, uint8_t version, size_t* extent, uint64_t* lsn,
              uint64_t* synced) {
  if (at > data.size() || data.size() - at < kRecordHeaderBytes) return false;
  std::string_view rest = data.substr(at);
  const uint64_t len = GetFixed(rest, 4);
  if (len < 8 || len > rest.size() - kRecordHeaderBytes) return false;
  if (JournalCrc32c(rest.substr(0, 4)) != static_cast<uint32_t>(GetFixed(rest.substr(4), 4)))
    return false;
  std::string_view payload = rest.substr(kRecordHeaderBytes, len);
  if (JournalCrc32c(payload) != static_cast<uint32_t>(GetFixed(rest.substr(8), 4))) return false;
  if (!DecodeNumbers(&payload, version, lsn, synced)) return false;
  *extent = kRecordHeaderBytes + len;
  return true;
}

// Every record of `data` from `from` on that reads whole, whatever lies
// between them (a hole, damage): found(at, extent, lsn, synced).
template <typename Found>
void ScanRecords(std::string_view data, size_t from, uint8_t version, Found&& found) {
  size_t at = from;
  while (at < data.size() && data.size() - at >= kRecordHeaderBytes) {
    size_t extent = 0;
    uint64_t lsn = 0;
    uint64_t synced = 0;
    if (RecordAt(data, at, version, &extent, &lsn, &synced)) {
      found(at, extent, lsn, synced);
      at += extent;
    } else {
      ++at;
    }
  }
}

// Whether a page of the file (kPageBytes, aligned, all in the file) that
// overlaps [from, to) reads as zeros from `from` (or its start) to its end:
// what a page that never reached the disk reads as (a hole, or
// preallocated zeros), or one whose last version did not (it reads as it
// was written back before: the records then, zeros after them).
bool HasZeroPage(std::string_view data, size_t from, size_t to) {
  to = std::min(to, data.size());
  for (size_t page = from / kPageBytes * kPageBytes; page < to; page += kPageBytes) {
    const size_t end = page + kPageBytes;
    if (end > data.size()) break;
    if (std::all_of(data.begin() + static_cast<ptrdiff_t>(std::max(page, from)),
                    data.begin() + static_cast<ptrdiff_t>(end), [](char c) { return c == '\0'; }))
      return true;
  }
  return false;
}

}  // namespace

Journal::Journal(const Options& options) : options_(options) {}

Result<std::unique_ptr<Journal>> Journal::Create(const Options& options, uint64_t next_lsn) {
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return Status::Unavailable("creating " + options.dir + ": " + ec.message());
  std::unique_ptr<Journal> j(new Journal(options));
  j->next_lsn_ = next_lsn;
  std::lock_guard<std::mutex> lock(j->mu_);
  if (Status st = j->OpenSegment(next_lsn); !st.ok()) return st;
  // The directory entry of the first segment is durable before any record.
  if (Status st = SyncDir(options.dir); !st.ok()) return st;
  j->dir_dirty_ = false;
  return j;
}

Journal::~Journal() {
  if (options_.fsync != FsyncPolicy::kNo) (void)Sync();  // as after a crash if it fails
  std::lock_guard<std::mutex> lock(mu_);
  for (int fd : to_close_) ::close(fd);
  if (fd_ >= 0) ::close(fd_);
}

Status Journal::OpenSegment(uint64_t first_lsn) {
  std::string path = options_.dir + "/" + SegmentName(first_lsn);
  // (Written at explicit offsets: a preallocated file is longer than its
  // records.)
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("creating " + path);
  std::string header(kMagic, sizeof kMagic);
  header.push_back(static_cast<char>(kJournalVersion));
  PutFixed64(&header, options_.segment_bytes);
  std::string crc(4, '\0');
  SetFixed32(crc.data(), JournalCrc32c(header));
  header += crc;
  if (Status st = WriteAll(fd, header.data(), header.size(), 0); !st.ok()) {
    ::close(fd);
    ::unlink(path.c_str());
    return st;
  }
  if (fd_ >= 0) {
    if (options_.fsync == FsyncPolicy::kNo) {
      ::close(fd_);
    } else {
      to_close_.push_back(fd_);  // Sync syncs and closes it
    }
  }
  fd_ = fd;
  size_ = zeroed_ = kHeaderBytes;
  bytes_.fetch_add(kHeaderBytes, std::memory_order_relaxed);
  segments_.push_back(Segment{first_lsn, path});
  dir_dirty_ = true;
  return Status::Ok();
}

void Journal::ZeroAhead(uint64_t end) {
  static const std::string zeros(64 << 10, '\0');
  const uint64_t until = end + kPreallocateBytes;
  uint64_t at = zeroed_;
  while (at < until) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), until - at));
    if (!WriteAll(fd_, zeros.data(), n, at).ok()) break;
    at += n;
  }
  bytes_.fetch_add(at - zeroed_, std::memory_order_relaxed);
  zeroed_ = at;
}

Status Journal::Broken() const {
  if (!broken_.load(std::memory_order_acquire)) return Status::Ok();
  return Status::Unavailable(broken_reason_);
}

Status Journal::Append(const std::vector<Mutation>& batch, uint64_t* lsn) {
  if (Status st = Broken(); !st.ok()) return st;
  if (cut_pending_) {
    if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) return Errno("cutting the journal back");
    cut_pending_ = false;
    bytes_.fetch_sub(zeroed_ - size_, std::memory_order_relaxed);
    zeroed_ = size_;
  }
  size_t count = 0;
  for (const Mutation& m : batch) count += m.deferrable ? 0 : 1;
  if (count == 0) {
    *lsn = 0;
    return Status::Ok();
  }
  buf_.assign(kRecordHeaderBytes, '\0');
  PutFixed64(&buf_, next_lsn_);
  PutFixed64(&buf_, synced_lsn_.load(std::memory_order_acquire));
  PutVarint(&buf_, count);
  for (const Mutation& m : batch) {
    if (m.deferrable) continue;
    buf_.push_back(static_cast<char>(m.kind));
    size_t len_at = buf_.size();
    buf_.append(4, '\0');
    if (m.is_object()) {
      EncodeObjectValue(m.object, &buf_);
    } else {
      EncodeJobValue(m.record, m.kind == Mutation::Kind::kPut ? std::string_view(m.body) : "",
                     &buf_);
    }
    SetFixed32(buf_.data() + len_at, static_cast<uint32_t>(buf_.size() - len_at - 4));
  }
  std::string_view payload(buf_.data() + kRecordHeaderBytes, buf_.size() - kRecordHeaderBytes);
  SetFixed32(buf_.data(), static_cast<uint32_t>(payload.size()));
  SetFixed32(buf_.data() + 4, JournalCrc32c(std::string_view(buf_.data(), 4)));
  SetFixed32(buf_.data() + 8, JournalCrc32c(payload));
  if (size_ >= options_.segment_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status st = OpenSegment(next_lsn_); !st.ok()) return st;
  }
  if (options_.preallocate && size_ + buf_.size() > zeroed_) ZeroAhead(size_ + buf_.size());
  if (Status st = WriteAll(fd_, buf_.data(), buf_.size(), size_, options_.pwrite); !st.ok()) {
    // Never a record after a torn one: cut back now, or before the next.
    cut_pending_ = true;
    if (::ftruncate(fd_, static_cast<off_t>(size_)) == 0) {
      cut_pending_ = false;
      bytes_.fetch_sub(zeroed_ - size_, std::memory_order_relaxed);
      zeroed_ = size_;
    }
    return st;
  }
  // Past the zeroed part the record made the file longer.
  if (size_ + buf_.size() > zeroed_)
    bytes_.fetch_add(size_ + buf_.size() - zeroed_, std::memory_order_relaxed);
  size_ += buf_.size();
  zeroed_ = std::max(zeroed_, size_);
  appended_lsn_.store(next_lsn_, std::memory_order_release);
  *lsn = next_lsn_++;
  return Status::Ok();
}

Status Journal::Sync() {
  std::lock_guard<std::mutex> one(sync_mu_);
  return SyncLocked(false);
}

Status Journal::SyncThrough(uint64_t lsn) {
  std::lock_guard<std::mutex> one(sync_mu_);
  if (synced_lsn_.load(std::memory_order_acquire) >= lsn) return Status::Ok();
  return SyncLocked(false);
}

bool Journal::TrySyncHere(Status* st) {
  std::unique_lock<std::mutex> one(sync_mu_, std::try_to_lock);
  if (!one.owns_lock()) return false;
  *st = SyncLocked(true);
  return true;
}

Status Journal::SyncLocked(bool on_append_thread) {
  if (Status st = Broken(); !st.ok()) return st;
  const auto start = std::chrono::steady_clock::now();
  // Appended before the sync starts: made durable by it.
  const uint64_t through = appended_lsn_.load(std::memory_order_acquire);
  std::vector<int> sealed;
  bool dir_dirty;
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Append may seal and close it meanwhile, unless this is its thread.
    fd = fd_;
    if (fd_ >= 0 && !on_append_thread) {
      fd = ::dup(fd_);
      // Out of descriptors (the listeners run close to the limit): nothing
      // was synced, nothing taken; tried again at the next sync.
      if (fd < 0) return Errno("syncing the journal (no descriptor for it)");
    }
    sealed.swap(to_close_);
    dir_dirty = dir_dirty_;
    dir_dirty_ = false;
  }
  Status result = Status::Ok();
  bool synced_not = false;  // an fdatasync or fsync failed
  for (int s : sealed) {
    if (options_.datasync(s) != 0 && result.ok()) {
      result = Errno("syncing the journal");
      synced_not = true;
    }
    ::close(s);
  }
  if (fd >= 0) {
    if (options_.datasync(fd) != 0 && result.ok()) {
      result = Errno("syncing the journal");
      synced_not = true;
    }
    if (!on_append_thread) ::close(fd);
  }
  if (dir_dirty && result.ok()) {
    if (Status st = SyncDir(options_.dir, &synced_not); !st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      dir_dirty_ = true;  // again next time, if it was the open that failed
      result = st;
    }
  }
  if (synced_not) {
    // Linux reports a failed writeback once, and may drop the pages it
    // could not write: a second fdatasync then succeeds with the records
    // lost. So a failed sync is never tried again, and nothing after it
    // is appended or acknowledged; a restart replays what the disk holds.
    broken_reason_ = result.message() +
                     " (a failed sync is not tried again: the kernel may have dropped what it "
                     "could not write; nothing more is written until delayqd restarts)";
    broken_.store(true, std::memory_order_release);
    return Broken();
  }
  if (result.ok()) {
    // One sync at a time (sync_mu_), and `through` only grows.
    if (through > synced_lsn_.load(std::memory_order_relaxed))
      synced_lsn_.store(through, std::memory_order_release);
  }
  syncs_.Observe(std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  return result;
}

bool Journal::HasSealed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_.size() > 1;
}

void Journal::ReleaseThrough(uint64_t lsn) {
  std::vector<std::string> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    // Segment i ends where segment i + 1 begins; the open one stays.
    while (n + 1 < segments_.size() && segments_[n + 1].first_lsn - 1 <= lsn) n++;
    for (size_t i = 0; i < n; ++i) gone.push_back(segments_[i].path);
    segments_.erase(segments_.begin(), segments_.begin() + static_cast<ptrdiff_t>(n));
  }
  for (const std::string& path : gone) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0)
      bytes_.fetch_sub(static_cast<uint64_t>(st.st_size), std::memory_order_relaxed);
    ::unlink(path.c_str());
  }
}

Status Journal::Replay(const std::string& dir, uint64_t after,
                       const std::function<Status(uint64_t, std::vector<Mutation>&)>& apply,
                       uint64_t* last, JournalCut* cut) {
  *last = after;
  if (cut != nullptr) *cut = JournalCut{};
  std::vector<std::pair<uint64_t, std::string>> segments;
  if (Status st = ListSegments(dir, &segments); !st.ok()) return st;
  if (!segments.empty() && segments[0].first > after + 1)
    return Status::Corruption("the journal in " + dir + " lacks records " +
                              std::to_string(after + 1) + " to " +
                              std::to_string(segments[0].first - 1));
  uint64_t expect = 0;  // the next record's number, once one was seen
  std::string data;
  std::vector<Mutation> batch;
  // One delayqd wrote every segment here (a start replays and removes
  // them all): the first header that reads gives their version, for a
  // segment whose own header a power cut left unwritten. Read only when
  // there is damage to judge.
  auto dir_version = [&segments]() -> uint8_t {
    for (const auto& segment : segments) {
      std::ifstream in(segment.second, std::ios::binary);
      char header[kHeaderBytesV2];
      if (in.read(header, kHeaderBytesV2) &&
          std::string_view(header, sizeof kMagic) == std::string_view(kMagic, sizeof kMagic))
        return static_cast<uint8_t>(header[7]);
    }
    return kJournalVersion;
  };
  bool ended = false;  // at the end of what a power cut left
  // Damage at byte `at` of segment `s` (in `data`), where record `due` was
  // to be. It ends the journal (true, `ended` set, *cut filled) when it is
  // what a power cut leaves of the part not yet synced: a hole (`hole`:
  // records missing between segments or a sealed segment's end; otherwise
  // a page between `at` and the next record that reads, zeros from `at` or
  // its start to its end: HasZeroPage), and no record written after it
  // says a sync had covered `due`. Otherwise *st is the corruption to
  // report.
  auto unwritten_tail = [&](size_t s, size_t at, uint64_t due, bool hole, Status damage,
                            Status* st) -> bool {
    *st = std::move(damage);
    const uint8_t version = dir_version();
    if (version < kVersionWithSynced) return false;  // records that say nothing synced
    JournalCut found;
    // (Records up to `after` are in the store: none of them is lost.)
    found.lsn = std::max(due, after + 1);
    found.path = segments[s].second;
    found.offset = at;
    found.what = st->message();
    size_t readable = data.size();  // where the next record that reads starts
    bool first = true;
    auto note = [&](size_t record_at, size_t, uint64_t lsn, uint64_t synced) {
      if (first) readable = record_at;
      first = false;
      found.last_synced = std::max(found.last_synced, synced);
      if (lsn >= found.lsn) found.records_after++;
    };
    ScanRecords(data, at + 1, version, note);
    first = false;
    if (!hole && !HasZeroPage(data, at, readable)) return false;
    std::string more;
    for (size_t t = s + 1; t < segments.size(); ++t) {
      if (!ReadFile(segments[t].second, &more).ok()) return false;  // cannot tell
      ScanRecords(more, 0, version, note);
    }
    if (found.last_synced >= due) {
      *st = Status::Corruption(st->message() + " (records written after it say record " +
                               std::to_string(found.last_synced) + " was synced)");
      return false;
    }
    if (cut != nullptr) *cut = std::move(found);
    ended = true;
    return true;
  };
  // The segment before was sealed before its records reached the size it
  // is sealed at (version 3): it lost its end, where records missing
  // before the next segment were. (A segment that reached that size and
  // then a whole segment missing is not what a power cut does: a
  // segment's name reached the directory before any later segment's.)
  bool short_before = false;
  Status st;
  for (size_t s = 0; s < segments.size() && !ended; ++s) {
    const std::string& path = segments[s].second;
    bool last_segment = s + 1 == segments.size();
    if (st = ReadFile(path, &data); !st.ok()) return st;
    const uint64_t due = expect != 0 ? expect : segments[s].first;
    auto damaged = [&](size_t at, const std::string& what) {
      return Status::Corruption("the journal " + path + " is damaged at byte " +
                                std::to_string(at) + ": " + what);
    };
    // The first record of a segment is the one its name gives (before its
    // header is read: records lost before a segment whose header a crash
    // cut short are a cut too, and said so).
    if (expect != 0 && segments[s].first < expect)
      return damaged(0, "it starts at record " + std::to_string(segments[s].first) +
                            ", which the segment before holds");
    if (expect != 0 && segments[s].first > expect) {
      if (unwritten_tail(s, 0, expect, short_before,
                         damaged(0, "records " + std::to_string(expect) + " to " +
                                        std::to_string(segments[s].first - 1) + " are missing"),
                         &st))
        break;
      return st;
    }
    if (data.size() < kHeaderBytesV2) {
      // A crash right after the segment was created.
      if (last_segment && std::string_view(data) == std::string_view(kMagic, data.size())) break;
      if (unwritten_tail(s, 0, due, true, damaged(0, "no header"), &st)) break;
      return st;
    }
    if (std::string_view(data.data(), sizeof kMagic) != std::string_view(kMagic, sizeof kMagic)) {
      if (unwritten_tail(s, 0, due, false, damaged(0, "not a delayq journal"), &st)) break;
      return st;
    }
    const uint8_t version = static_cast<uint8_t>(data[7]);
    if (version > kJournalVersion)
      return Status::InvalidArgument("the journal " + path +
                                     " has a format this delayqd does not know");
    size_t header = kHeaderBytesV2;
    uint64_t seal_at = 0;  // the size it is sealed at (version 3 on)
    if (version >= kVersionWithSynced) {
      header = kHeaderBytes;
      if (data.size() < kHeaderBytes) {
        if (last_segment) break;  // a crash while its header was written
        if (unwritten_tail(s, 0, due, true, damaged(0, "a header cut short"), &st)) break;
        return st;
      }
      if (JournalCrc32c(std::string_view(data.data(), 16)) !=
          static_cast<uint32_t>(GetFixed(std::string_view(data).substr(16), 4))) {
        if (unwritten_tail(s, 0, due, false, damaged(0, "checksum mismatch in its header"), &st))
          break;
        return st;
      }
      seal_at = GetFixed(std::string_view(data).substr(8), 8);
    }
    size_t at = header;
    while (at < data.size()) {
      std::string_view rest(data.data() + at, data.size() - at);
      // Zeros after a segment's last record: the part of a preallocated
      // segment no record reached (a gap before the next segment shows as
      // missing numbers there).
      if (ZerosFrom(rest, 0)) break;
      const uint64_t here = expect != 0 ? expect : segments[s].first;
      // Torn: the append a crash cut short, the last one written. Its bytes
      // are a prefix of what was written, then nothing, or zeros (where a
      // power cut left the file longer than its data, or it was
      // preallocated), past the `extent` the record takes; anything else is
      // damage, unless a power cut left it unwritten (unwritten_tail).
      auto torn = [&](size_t extent) { return last_segment && ZerosFrom(rest, extent); };
      if (rest.size() < kRecordHeaderBytes) {
        if (torn(kRecordHeaderBytes)) break;
        if (unwritten_tail(s, at, here, true, damaged(at, "a record header cut short"), &st)) break;
        return st;
      }
      uint32_t len = static_cast<uint32_t>(GetFixed(rest, 4));
      if (JournalCrc32c(rest.substr(0, 4)) != static_cast<uint32_t>(GetFixed(rest.substr(4), 4))) {
        if (torn(kRecordHeaderBytes)) break;
        if (unwritten_tail(s, at, here, false, damaged(at, "checksum mismatch in a record header"),
                           &st))
          break;
        return st;
      }
      if (len > kMaxRecordBytes)
        return damaged(at, "a record of " + std::to_string(len) + " bytes");
      if (len > rest.size() - kRecordHeaderBytes) {
        if (last_segment) break;  // the payload was not all written
        if (unwritten_tail(s, at, here, true,
                           damaged(at, "a record runs past the end of its segment"), &st))
          break;
        return st;
      }
      std::string_view payload = rest.substr(kRecordHeaderBytes, len);
      if (JournalCrc32c(payload) != static_cast<uint32_t>(GetFixed(rest.substr(8), 4))) {
        if (torn(kRecordHeaderBytes + len)) break;  // its data blocks not all written
        if (unwritten_tail(s, at, here, false, damaged(at, "checksum mismatch"), &st)) break;
        return st;
      }
      uint64_t lsn = 0;
      uint64_t synced = 0;
      if (st = DecodeRecord(payload, version, &lsn, &synced, &batch); !st.ok())
        return damaged(at, st.message());
      if (expect == 0 && lsn != segments[s].first)
        return damaged(at, "record " + std::to_string(lsn) + " opens segment " +
                               std::to_string(segments[s].first));
      if (expect != 0 && lsn != expect)
        return damaged(
            at, "record " + std::to_string(lsn) + " where " + std::to_string(expect) + " was due");
      expect = lsn + 1;
      if (lsn > after) {
        if (st = apply(lsn, batch); !st.ok()) return st;
        *last = lsn;
      }
      at += kRecordHeaderBytes + len;
    }
    if (expect == 0) expect = segments[s].first;  // an empty segment
    short_before = !ended && at < seal_at;
  }
  return Status::Ok();
}

Status Journal::RemoveAll(const std::string& dir) {
  std::vector<std::pair<uint64_t, std::string>> segments;
  if (Status st = ListSegments(dir, &segments); !st.ok()) return st;
  // Newest first: a crash part way leaves the oldest, from which the
  // next start replays as this one did (a journal whose first segments
  // were gone would read as records lost, and one cut short by a power
  // cut may hold records past the cut).
  for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
    if (::unlink(it->second.c_str()) != 0 && errno != ENOENT)
      return Errno("removing " + it->second);
  }
  return segments.empty() ? Status::Ok() : SyncDir(dir);
}

}  // namespace delayq::store
