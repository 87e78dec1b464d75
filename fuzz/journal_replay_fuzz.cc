// libFuzzer target for the journal's replay (store/journal.h): what a crash,
// a power cut or a damaged disk leaves in the journal's files.
//
// The input is one or two segment files: when its first byte is odd, the
// two bytes after it (little endian) say where the first file ends, the
// byte after that how far past the first file's first record the second
// file's name starts (0..255), and the rest is the files' bytes; when even,
// the rest is one file. The first file is named for record 1.
// Checks:
//  - Replay returns ok, corruption or invalid_argument (never anything
//    else, never a crash), and the same twice over the same files;
//  - the records it applies are numbered 1, 2, 3, ... and *last is the
//    last of them (0 when none);
//  - when it ends the journal at a power cut's hole, the first record lost
//    is the one after the last applied, and no record read past the hole
//    said that one was synced;
//  - replaying after the last record applied applies nothing more and
//    ends the same way.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "fuzz_check.h"
#include "store/journal.h"

using namespace delayq;

namespace {

std::string SegmentPath(const std::string& dir, uint64_t first) {
  char name[32];
  std::snprintf(name, sizeof name, "%020llu.jnl", static_cast<unsigned long long>(first));
  return dir + "/" + name;
}

void WriteFile(const std::string& path, std::string_view data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(data.data(), static_cast<std::streamsize>(data.size()));
}

struct Outcome {
  Code code = Code::kOk;
  std::vector<uint64_t> applied;
  uint64_t last = 0;
  store::JournalCut cut;
};

Outcome Replay(const std::string& dir, uint64_t after) {
  Outcome out;
  Status st = store::Journal::Replay(
      dir, after,
      [&](uint64_t lsn, std::vector<Mutation>&) {
        out.applied.push_back(lsn);
        return Status::Ok();
      },
      &out.last, &out.cut);
  out.code = st.code();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/delayq-journal-fuzz-XXXXXX";
    const char* made = mkdtemp(tmpl);
    if (made == nullptr) std::abort();
    return std::string(made);
  }();
  for (const auto& e : std::filesystem::directory_iterator(dir)) std::filesystem::remove(e.path());
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.empty()) return 0;
  const bool two = (static_cast<uint8_t>(in[0]) & 1) != 0;
  in.remove_prefix(1);
  if (two) {
    if (in.size() < 3) return 0;
    const size_t split = static_cast<uint8_t>(in[0]) | (static_cast<size_t>(in[1]) & 0xff) << 8;
    const uint64_t second_first = 2 + static_cast<uint8_t>(in[2]);
    in.remove_prefix(3);
    const size_t at = split < in.size() ? split : in.size();
    WriteFile(SegmentPath(dir, 1), in.substr(0, at));
    WriteFile(SegmentPath(dir, second_first), in.substr(at));
  } else {
    WriteFile(SegmentPath(dir, 1), in);
  }

  const Outcome first = Replay(dir, 0);
  FUZZ_CHECK(first.code == Code::kOk || first.code == Code::kCorruption ||
                 first.code == Code::kInvalidArgument,
             "a replay that failed otherwise than on its files' content");
  for (size_t i = 0; i < first.applied.size(); ++i)
    FUZZ_CHECK(first.applied[i] == i + 1, "records applied out of order or with a gap");
  if (first.code == Code::kOk) {
    FUZZ_CHECK(first.last == first.applied.size(), "*last is not the last record applied");
    if (first.cut.lsn != 0) {
      FUZZ_CHECK(first.cut.lsn == first.last + 1, "a cut that is not after the last record");
      FUZZ_CHECK(first.cut.last_synced < first.cut.lsn,
                 "a cut of a record that a later one says was synced");
    }
    // From the last record applied on: nothing more, the same end.
    const Outcome again = Replay(dir, first.last);
    FUZZ_CHECK(again.code == Code::kOk && again.applied.empty() && again.last == first.last &&
                   again.cut.lsn == first.cut.lsn,
               "replaying after the last record does not end the same way");
  } else {
    FUZZ_CHECK(first.cut.lsn == 0, "a failed replay that says it cut the journal");
  }
  const Outcome twice = Replay(dir, 0);
  FUZZ_CHECK(twice.code == first.code && twice.applied == first.applied &&
                 twice.last == first.last && twice.cut.lsn == first.cut.lsn &&
                 twice.cut.records_after == first.cut.records_after,
             "two replays of the same files differ");
  return 0;
}
