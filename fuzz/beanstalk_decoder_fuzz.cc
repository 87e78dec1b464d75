// libFuzzer target for the beanstalkd protocol decoder.
//
// The whole input is the byte stream of one connection. Its first bytes also
// choose a split position and a max job size. Checks:
//  - feeding the stream whole, split in two, and (up to 256 bytes) byte by byte
//    gives the same items (commands field by field, replies, close) and the
//    same unconsumed rest;
//  - the same items as a literal model of beanstalkd 1.12's input handling
//    fed in reads of varying sizes (beanstalk_decoder_reference.h);
//  - consumed <= input size; every item but kNeedMore consumes bytes; a
//    repeated call after kNeedMore consumes nothing; the caller never holds
//    more than one line plus one acceptable body; decoded fields respect the
//    grammar's bounds.
//
// Build and run by hand:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined \
//     -I src -I include fuzz/beanstalk_decoder_fuzz.cc src/server/beanstalk_decoder.cc \
//     -o /tmp/beanstalk_decoder_fuzz
//   /tmp/beanstalk_decoder_fuzz -max_total_time=60 -dict=fuzz/beanstalk_decoder.dict \
//     /tmp/corpus fuzz/corpus/beanstalk
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/beanstalk_decoder.h"
#include "server/beanstalk_decoder_reference.h"

namespace {

using delayq::server::BeanCommand;
using delayq::server::BeanDecoder;
using delayq::server::BeanOp;
using delayq::server::kMaxLineLength;
using Kind = BeanDecoder::Kind;

#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

void Put64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
void PutStr(std::string* out, std::string_view s) {
  Put64(out, s.size());
  out->append(s);
}

// An owned, field-by-field encoding of one item; checks the field bounds.
std::string Encode(const BeanDecoder::Item& item, size_t max_job_size) {
  std::string e(1, static_cast<char>(item.kind));
  if (item.kind == Kind::kReply) {
    FUZZ_CHECK(item.reply.size() >= 2 && item.reply.substr(item.reply.size() - 2) == "\r\n");
    PutStr(&e, item.reply);
    e += item.counted ? '1' : '0';
    if (item.counted) {
      FUZZ_CHECK(item.command.op == BeanOp::kPut || item.command.op == BeanOp::kPutEx ||
                 item.command.op == BeanOp::kPauseTube);
      e += static_cast<char>(item.command.op);
    }
    return e;
  }
  if (item.kind != Kind::kCommand) return e;
  const BeanCommand& c = item.command;
  e += static_cast<char>(c.op);
  Put64(&e, c.id);
  Put64(&e, c.pri);
  Put64(&e, c.bytes);
  Put64(&e, c.delay);
  Put64(&e, c.ttr);
  Put64(&e, static_cast<uint64_t>(c.timeout));
  Put64(&e, c.count);
  Put64(&e, c.has_at);
  Put64(&e, c.at);
  Put64(&e, c.tries);
  Put64(&e, c.clear_mask);
  PutStr(&e, c.name);
  PutStr(&e, c.key);
  PutStr(&e, c.backoff);
  PutStr(&e, c.secret);
  PutStr(&e, c.body);

  FUZZ_CHECK(c.op != BeanOp::kQuit);
  FUZZ_CHECK(c.name.size() <= 200 && c.key.size() <= 200 && c.backoff.size() <= 100 &&
             c.secret.size() <= 200);
  if (c.op == BeanOp::kPut || c.op == BeanOp::kPutEx) {
    FUZZ_CHECK(c.body.size() == c.bytes && c.bytes <= max_job_size);
  } else {
    FUZZ_CHECK(c.body.empty());
  }
  if (c.op == BeanOp::kReserveBatch) FUZZ_CHECK(c.count >= 1 && c.count <= 1000);
  if (c.op == BeanOp::kClearTube) FUZZ_CHECK(c.clear_mask >= 1 && c.clear_mask <= 7);
  if (c.op == BeanOp::kKick) FUZZ_CHECK(c.count <= UINT32_MAX);
  if (c.op == BeanOp::kReserveWithTimeout) {
    FUZZ_CHECK(c.timeout >= INT32_MIN && c.timeout <= INT32_MAX);
  }
  return e;
}

struct Fed {
  std::vector<std::string> items;
  std::string rest;  // unconsumed input, or "<closed>"
};

Fed Feed(size_t max_job_size, const std::vector<std::string_view>& chunks) {
  BeanDecoder d(max_job_size);
  std::string buf;
  Fed fed;
  for (std::string_view chunk : chunks) {
    buf.append(chunk);
    const size_t max_calls = buf.size() + 1;  // all but the last item consume bytes
    for (size_t calls = 1;; ++calls) {
      FUZZ_CHECK(calls <= max_calls);
      BeanDecoder::Item item = d.Next(buf);
      FUZZ_CHECK(item.consumed <= buf.size());
      if (item.kind != Kind::kNeedMore) {
        FUZZ_CHECK(item.consumed > 0);
        fed.items.push_back(Encode(item, max_job_size));
      }
      buf.erase(0, item.consumed);
      if (item.kind == Kind::kClose) {
        fed.rest = "<closed>";
        return fed;
      }
      if (item.kind == Kind::kNeedMore) {
        BeanDecoder::Item again = d.Next(buf);
        FUZZ_CHECK(again.kind == Kind::kNeedMore && again.consumed == 0);
        FUZZ_CHECK(buf.size() < kMaxLineLength + max_job_size + 2);
        break;
      }
    }
  }
  fed.rest = buf;
  return fed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3 || size > (1 << 16)) return 0;
  static constexpr size_t kMaxJobSizes[] = {0, 1, 5, 16, 64, 300, 65535};
  size_t max_job_size = kMaxJobSizes[data[2] % (sizeof kMaxJobSizes / sizeof kMaxJobSizes[0])];
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t cut = (size_t{data[0]} | size_t{data[1]} << 8) % (size + 1);

  Fed whole = Feed(max_job_size, {input});
  Fed split = Feed(max_job_size, {input.substr(0, cut), input.substr(cut)});
  FUZZ_CHECK(split.items == whole.items);
  FUZZ_CHECK(split.rest == whole.rest);

  if (size <= 256) {
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < size; ++i) bytes.push_back(input.substr(i, 1));
    Fed by_byte = Feed(max_job_size, bytes);
    FUZZ_CHECK(by_byte.items == whole.items);
    FUZZ_CHECK(by_byte.rest == whole.rest);
  }

  // The literal model of 1.12, in reads of pseudo-random sizes.
  uint32_t rng = data[0] * 2654435761u + data[1] + 1;
  std::vector<std::string> model_items;
  delayq::server::reference::Beanstalkd112InputModel model(max_job_size);
  model.Run(
      input,
      [&rng](size_t want) -> size_t {
        rng = rng * 1664525u + 1013904223u;
        return 1 + (rng >> 8) % ((rng & 1) != 0 ? want : 16);
      },
      [&](const BeanDecoder::Item& item) { model_items.push_back(Encode(item, max_job_size)); });
  FUZZ_CHECK(model_items == whole.items);
  return 0;
}
