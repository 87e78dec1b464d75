// HTTP/1.1 requests out of the bytes a connection received: Beast's parser
// with the server's limits and the checks the server adds, free of sockets
// (so it is tested with input split at every byte, and fuzzed). Of each
// request only what the server reads is kept (method, target, version,
// body, and the fields Authorization, Transfer-Encoding, Content-Encoding
// and Expect, each its first occurrence), in strings that keep their room
// from one request to the next.
//
// What it refuses, with the reply to send before closing the connection:
// a header over max_header_bytes (431 header_too_large; so are a chunk's
// extensions and the trailer fields), a body over
// max_body_bytes (413 payload_too_large), a Transfer-Encoding other than
// chunked (501 not_implemented), a Content-Encoding other than identity
// (415 unsupported_media_type), and anything else Beast refuses or throws
// on (400 bad_request). `Expect: 100-continue` is answered with an interim
// `100 Continue` as soon as the header is whole and the body is not.
//
// Beast stays out of this header.
//
// Thread: one connection's (the loop thread).
#ifndef DELAYQ_SERVER_HTTP_REQUEST_READER_H_
#define DELAYQ_SERVER_HTTP_REQUEST_READER_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_api.h"

namespace delayq::server {

class HttpRequestReader {
 public:
  using Clock = std::chrono::steady_clock;

  HttpRequestReader(size_t max_header_bytes, size_t max_body_bytes);
  ~HttpRequestReader();
  HttpRequestReader(const HttpRequestReader&) = delete;
  HttpRequestReader& operator=(const HttpRequestReader&) = delete;

  // Bytes received, to parse.
  void Append(std::string_view bytes);
  // Bytes received and not parsed yet (a request's body, once begun, is
  // the parser's).
  size_t buffered() const { return in_.size() - in_pos_; }
  // Drops what is buffered (the connection closes).
  void Discard();

  enum class Result {
    kNeedMore,  // no whole request in what is buffered
    kRequest,   // request() is whole: handle it, then call Next()
    kRefused,   // refusal() is the reply; the connection is to close
  };
  // Parses what is buffered, up to the end of one request. `interim` gets
  // the bytes of an interim reply to send now (`100 Continue`), if any.
  // REQUIRES: not after kRequest without Next(), nor after kRefused.
  Result Parse(Clock::time_point now, std::string* interim);

  struct Request {
    std::string_view method, target, body;  // valid until Next()
    std::string_view authorization;         // the header's value, or empty
    bool keep_alive = true;
    bool http10 = false;
    bool head = false;
  };
  // REQUIRES: Parse returned kRequest.
  Request request() const;
  // The request was handled: the next one may be parsed.
  void Next();

  // After kRefused: the reply, and, when it came from an exception, a
  // logfmt detail for the server's warning (else empty).
  const HttpReply& refusal() const { return refusal_; }
  const std::string& exception() const { return exception_; }

  // The request being read: begun (a byte of it was parsed), when, and
  // when its header was whole.
  bool begun() const { return begun_; }
  bool header_done() const { return header_checked_; }
  Clock::time_point begun_at() const { return begun_at_; }
  Clock::time_point header_done_at() const { return header_done_at_; }

 private:
  struct Parts;
  struct Parser;
  void NewParser();
  Result Refuse(int status, std::string_view code, std::string message);
  // 431: a header over the limit, or (past_header) a chunk's extensions or
  // the trailer fields.
  Result TooLarge(bool past_header);
  // The header is whole: false (refused) for a coding the server does not
  // apply.
  bool CheckHeader(Clock::time_point now, std::string* interim);

  size_t max_header_bytes_, max_body_bytes_;
  std::unique_ptr<Parts> parts_;
  // One per request (Beast's parser reads one message), made in place.
  std::unique_ptr<std::optional<Parser>> parser_;
  std::string in_;     // received; in_pos_ onwards not parsed yet
  size_t in_pos_ = 0;  // (the parser keeps the body of a request it has begun)
  HttpReply refusal_;
  std::string exception_;
  bool begun_ = false, header_checked_ = false;
  Clock::time_point begun_at_, header_done_at_;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_HTTP_REQUEST_READER_H_
