// The commands delayq sends to Redis, written in RESP (the Redis
// serialization protocol) by hand: an array of bulk strings, appended to
// one buffer in one pass. hiredis sends the buffer as it is
// (redisAsyncFormattedCommand) and parses the replies; its own formatting
// (redisFormatSdsCommandArgv) builds each argument with a printf-like
// routine and grows its buffer piece by piece, which cost delayqd more
// than any other part of a call (docs/redis-backend.md, "Cost of a call").
#ifndef DELAYQ_BACKEND_RESP_H_
#define DELAYQ_BACKEND_RESP_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace delayq::backend::resp {

// Bytes AppendBulk adds for an argument of `size` bytes.
size_t BulkSize(size_t size);
// "*<n>\r\n": an array of n arguments follows.
void AppendArray(std::string& out, size_t n);
// "$<size>\r\n<arg>\r\n".
void AppendBulk(std::string& out, std::string_view arg);
// Bytes AppendBulks adds for these arguments.
template <typename Range>
size_t BulksSize(const Range& args) {
  size_t size = 0;
  for (std::string_view a : args) size += BulkSize(a.size());
  return size;
}
// Each argument as AppendBulk writes it, one after the other.
template <typename Range>
void AppendBulks(std::string& out, const Range& args) {
  for (std::string_view a : args) AppendBulk(out, a);
}
// The whole command.
std::string Format(std::span<const std::string_view> argv);

}  // namespace delayq::backend::resp

#endif  // DELAYQ_BACKEND_RESP_H_
