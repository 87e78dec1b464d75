// A growable byte buffer for connection input: read into its free tail,
// consume from its head, without zero-filling or per-read allocation. It
// grows by half (not doubling, which can make 4 MB of data take 8 MB), to
// whole pages.
// Thread: owned by one connection.
#ifndef DELAYQ_SERVER_BYTE_BUFFER_H_
#define DELAYQ_SERVER_BYTE_BUFFER_H_

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

namespace delayq::server {

class ByteBuffer {
 public:
  std::string_view view() const { return {data_.get() + begin_, end_ - begin_}; }
  size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }

  // Returns space for at least `n` more bytes at the tail.
  char* Prepare(size_t n) {
    if (cap_ - end_ < n) {
      size_t used = size();
      if (begin_ > 0 && cap_ - used >= n && used <= cap_ / 2) {
        std::memmove(data_.get(), data_.get() + begin_, used);
      } else {
        size_t cap = std::max(used + n, cap_ + cap_ / 2);
        cap = (cap + kPage - 1) / kPage * kPage;
        std::unique_ptr<char[]> fresh(new char[cap]);
        if (used > 0) std::memcpy(fresh.get(), data_.get() + begin_, used);
        data_ = std::move(fresh);
        cap_ = cap;
      }
      begin_ = 0;
      end_ = used;
    }
    return data_.get() + end_;
  }
  size_t writable() const { return cap_ - end_; }
  void Commit(size_t n) { end_ += n; }
  void Append(std::string_view s) {
    if (s.empty()) return;  // (memcpy must not see a null pointer)
    std::memcpy(Prepare(s.size()), s.data(), s.size());
    Commit(s.size());
  }
  void Consume(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  size_t capacity() const { return cap_; }
  // Frees a large buffer once it is empty again.
  void ShrinkIfIdle(size_t keep) {
    if (empty() && cap_ > keep) {
      data_.reset();
      cap_ = begin_ = end_ = 0;
    }
  }

 private:
  static constexpr size_t kPage = 4096;
  std::unique_ptr<char[]> data_;
  size_t cap_ = 0, begin_ = 0, end_ = 0;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_BYTE_BUFFER_H_
