#include "server/http_request_reader.h"

// GCC 12 with the sanitizers reports a false -Wmaybe-uninitialized inside
// Beast's parser (a boost::optional it fills before reading).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <algorithm>
#include <cctype>
#include <exception>
#include <iterator>
#include <optional>
#include <utility>

namespace delayq::server {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

// Compacts the input once this much of it was parsed.
constexpr size_t kCompactAt = 64 * 1024;
// A body buffer larger than this is freed after its request.
constexpr size_t kKeepBody = 64 * 1024;

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string_view Trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

// What the server reads of a request: kept from one request to the next,
// so that once they have grown the strings take each request without an
// allocation.
struct HttpRequestReader::Parts {
  http::verb verb = http::verb::unknown;
  int version = 11;
  std::string method, target, body;
  // The header fields the server reads, each its first occurrence.
  std::string authorization, transfer_encoding, content_encoding, expect;
  uint8_t seen = 0;  // which of those came (a bit each)
  bool header_done = false;

  void Clear() {
    verb = http::verb::unknown;
    version = 11;
    method.clear();
    target.clear();
    body.clear();
    if (body.capacity() > kKeepBody) std::string().swap(body);
    authorization.clear();
    transfer_encoding.clear();
    content_encoding.clear();
    expect.clear();
    seen = 0;
    header_done = false;
  }
};

// Beast's parser (framing, limits, validation), keeping of each request
// only its Parts: no container of every field, nothing allocated per
// field. Trailer fields (after a chunked body) are read and dropped; they,
// and a chunk's extensions, are held to the header's limit, which Beast
// does not do.
struct HttpRequestReader::Parser final : http::basic_parser<true> {
  using string_view = boost::beast::string_view;
  using error_code = boost::beast::error_code;

  Parser(Parts& parts, size_t max_header_bytes)
      : parts_(parts), max_header_bytes_(max_header_bytes) {}

  void on_request_impl(http::verb verb, string_view method, string_view target, int version,
                       error_code&) override {
    parts_.verb = verb;
    parts_.method.assign(method.data(), method.size());
    parts_.target.assign(target.data(), target.size());
    parts_.version = version;
  }
  void on_response_impl(int, string_view, int, error_code&) override {}  // a request's parser
  void on_field_impl(http::field name, string_view name_string, string_view value,
                     error_code& ec) override {
    if (parts_.header_done) {  // a trailer field: "name: value" CRLF
      trailer_bytes_ += name_string.size() + value.size() + 4;
      if (trailer_bytes_ > max_header_bytes_) ec = http::error::header_limit;
      return;
    }
    static constexpr std::pair<http::field, std::string Parts::*> kKept[] = {
        {http::field::authorization, &Parts::authorization},
        {http::field::transfer_encoding, &Parts::transfer_encoding},
        {http::field::content_encoding, &Parts::content_encoding},
        {http::field::expect, &Parts::expect},
    };
    for (size_t i = 0; i < std::size(kKept); ++i) {
      const uint8_t bit = static_cast<uint8_t>(1u << i);
      if (kKept[i].first != name || (parts_.seen & bit) != 0) continue;
      parts_.seen |= bit;
      (parts_.*kKept[i].second).assign(value.data(), value.size());
    }
  }
  void on_header_impl(error_code&) override { parts_.header_done = true; }
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    // (A length over the body limit was refused before this.)
    if (length) parts_.body.reserve(static_cast<size_t>(std::min<std::uint64_t>(*length, 1 << 20)));
  }
  size_t on_body_impl(string_view body, error_code&) override {
    parts_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view extensions, error_code& ec) override {
    if (extensions.size() > max_header_bytes_) ec = http::error::header_limit;
  }
  size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override {
    parts_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  Parts& parts_;
  const size_t max_header_bytes_;
  size_t trailer_bytes_ = 0;
};

HttpRequestReader::HttpRequestReader(size_t max_header_bytes, size_t max_body_bytes)
    : max_header_bytes_(max_header_bytes),
      max_body_bytes_(max_body_bytes),
      parts_(std::make_unique<Parts>()),
      parser_(std::make_unique<std::optional<Parser>>()) {
  NewParser();
}

HttpRequestReader::~HttpRequestReader() = default;

void HttpRequestReader::NewParser() {
  parts_->Clear();
  Parser& p = parser_->emplace(*parts_, max_header_bytes_);
  p.header_limit(static_cast<uint32_t>(max_header_bytes_));
  p.body_limit(max_body_bytes_);
  p.eager(true);
  begun_ = false;
  header_checked_ = false;
}

void HttpRequestReader::Append(std::string_view bytes) {
  if (in_pos_ > 0 && in_pos_ == in_.size()) {
    in_.clear();
    in_pos_ = 0;
  }
  in_.append(bytes);
}

void HttpRequestReader::Discard() {
  in_.clear();
  in_pos_ = 0;
  begun_ = false;
}

HttpRequestReader::Result HttpRequestReader::Parse(Clock::time_point now, std::string* interim) {
  Result result = Result::kNeedMore;
  while (in_pos_ < in_.size()) {
    if (!begun_) {
      begun_ = true;
      begun_at_ = now;
    }
    boost::system::error_code ec;
    size_t used = 0;
    try {
      used = (*parser_)->put(asio::const_buffer(in_.data() + in_pos_, in_.size() - in_pos_), ec);
    } catch (const std::exception& e) {
      // Beast throws on some input (a trailer field past 64 KiB throws
      // std::length_error): this request is bad, nothing more.
      exception_ = "what=\"" + std::string(e.what()) + "\"";
      return Refuse(400, "bad_request", "malformed HTTP request: " + std::string(e.what()));
    }
    in_pos_ += used;
    // The header first: a coding the server does not apply is the reason
    // to give, even when the body it framed did not parse.
    if (!header_checked_ && (*parser_)->is_header_done() && !CheckHeader(now, interim))
      return Result::kRefused;
    if (ec == http::error::need_more) {
      // Waiting unparsed: a header, which Beast holds to its limit, or a
      // chunk's size line or the trailer fields, which Beast takes whole
      // when they are there and holds to no limit: the header's limit
      // (twice: the line and the fields each have it) bounds what waits.
      if ((*parser_)->is_header_done() && in_.size() - in_pos_ > 2 * max_header_bytes_ + 64)
        return TooLarge(true);
      break;
    }
    if (ec == http::error::header_limit) return TooLarge((*parser_)->is_header_done());
    if (ec == http::error::body_limit) {
      return Refuse(
          413, "payload_too_large",
          "the request body is larger than " + std::to_string(max_body_bytes_) + " bytes");
    }
    if (ec) return Refuse(400, "bad_request", "malformed HTTP request: " + ec.message());
    if ((*parser_)->is_done()) {
      result = Result::kRequest;
      break;
    }
  }
  if (in_pos_ == in_.size()) {
    in_.clear();
    in_pos_ = 0;
  } else if (in_pos_ > kCompactAt) {
    in_.erase(0, in_pos_);
    in_pos_ = 0;
  }
  return result;
}

bool HttpRequestReader::CheckHeader(Clock::time_point now, std::string* interim) {
  header_checked_ = true;
  header_done_at_ = now;
  const Parts& req = *parts_;
  // Codings the server does not apply: read as plain bytes, the body would
  // be misread silently.
  struct Coding {
    std::string Parts::*field;
    std::string_view name, allowed;
    int status;
    std::string_view code, advice;
  };
  static constexpr Coding kCodings[] = {
      {&Parts::transfer_encoding, "Transfer-Encoding", "chunked", 501, "not_implemented",
       "send the body as it is or chunked"},
      {&Parts::content_encoding, "Content-Encoding", "identity", 415, "unsupported_media_type",
       "send the body uncompressed"},
  };
  for (const Coding& c : kCodings) {
    std::string_view v = Trimmed(req.*c.field);
    if (v.empty() || IEquals(v, c.allowed)) continue;
    Refuse(c.status, c.code,
           std::string(c.name) + " '" + std::string(v.substr(0, 64)) + "' is not supported; " +
               std::string(c.advice));
    return false;
  }
  if (!(*parser_)->is_done() && IEquals(Trimmed(req.expect), "100-continue"))
    interim->append("HTTP/1.1 100 Continue\r\n\r\n");
  return true;
}

HttpRequestReader::Result HttpRequestReader::TooLarge(bool past_header) {
  return Refuse(431, "header_too_large",
                std::string(past_header ? "a chunk's extensions or the trailer fields are"
                                        : "the request header is") +
                    " larger than " + std::to_string(max_header_bytes_) + " bytes");
}

HttpRequestReader::Result HttpRequestReader::Refuse(int status, std::string_view code,
                                                    std::string message) {
  refusal_ = HttpReply{status, HttpErrorBody(code, message), {}};
  Discard();
  return Result::kRefused;
}

HttpRequestReader::Request HttpRequestReader::request() const {
  const Parts& req = *parts_;
  return Request{req.method,
                 req.target,
                 req.body,
                 req.authorization,
                 (*parser_)->keep_alive(),
                 req.version < 11,
                 req.verb == http::verb::head};
}

void HttpRequestReader::Next() {
  exception_.clear();
  NewParser();
}

}  // namespace delayq::server
