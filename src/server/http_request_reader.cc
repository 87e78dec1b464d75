#include "server/http_request_reader.h"

// GCC 12 with the sanitizers reports a false -Wmaybe-uninitialized inside
// Beast's parser (a boost::optional it fills before reading).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <cctype>
#include <exception>

namespace delayq::server {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

// Compacts the input once this much of it was parsed.
constexpr size_t kCompactAt = 64 * 1024;

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string_view Trimmed(boost::beast::string_view v) {
  std::string_view s(v.data(), v.size());
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

struct HttpRequestReader::Parser {
  http::request_parser<http::string_body> p;
};

HttpRequestReader::HttpRequestReader(size_t max_header_bytes, size_t max_body_bytes)
    : max_header_bytes_(max_header_bytes), max_body_bytes_(max_body_bytes) {
  NewParser();
}

HttpRequestReader::~HttpRequestReader() = default;

void HttpRequestReader::NewParser() {
  parser_ = std::make_unique<Parser>();
  parser_->p.header_limit(static_cast<uint32_t>(max_header_bytes_));
  parser_->p.body_limit(max_body_bytes_);
  parser_->p.eager(true);
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
      used = parser_->p.put(asio::const_buffer(in_.data() + in_pos_, in_.size() - in_pos_), ec);
    } catch (const std::exception& e) {
      // Beast throws on some input (a trailer field past 64 KiB throws
      // std::length_error): this request is bad, nothing more.
      exception_ = "what=\"" + std::string(e.what()) + "\"";
      return Refuse(400, "bad_request", "malformed HTTP request: " + std::string(e.what()));
    }
    in_pos_ += used;
    // The header first: a coding the server does not apply is the reason
    // to give, even when the body it framed did not parse.
    if (!header_checked_ && parser_->p.is_header_done() && !CheckHeader(now, interim))
      return Result::kRefused;
    if (ec == http::error::need_more) break;
    if (ec == http::error::header_limit) {
      return Refuse(
          431, "header_too_large",
          "the request header is larger than " + std::to_string(max_header_bytes_) + " bytes");
    }
    if (ec == http::error::body_limit) {
      return Refuse(
          413, "payload_too_large",
          "the request body is larger than " + std::to_string(max_body_bytes_) + " bytes");
    }
    if (ec) return Refuse(400, "bad_request", "malformed HTTP request: " + ec.message());
    if (parser_->p.is_done()) {
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
  auto& req = parser_->p.get();
  // Codings the server does not apply: read as plain bytes, the body would
  // be misread silently.
  struct Coding {
    http::field field;
    std::string_view name, allowed;
    int status;
    std::string_view code, advice;
  };
  static constexpr Coding kCodings[] = {
      {http::field::transfer_encoding, "Transfer-Encoding", "chunked", 501, "not_implemented",
       "send the body as it is or chunked"},
      {http::field::content_encoding, "Content-Encoding", "identity", 415, "unsupported_media_type",
       "send the body uncompressed"},
  };
  for (const Coding& c : kCodings) {
    std::string_view v = Trimmed(req[c.field]);
    if (v.empty() || IEquals(v, c.allowed)) continue;
    Refuse(c.status, c.code,
           std::string(c.name) + " '" + std::string(v.substr(0, 64)) + "' is not supported; " +
               std::string(c.advice));
    return false;
  }
  if (!parser_->p.is_done() && IEquals(Trimmed(req[http::field::expect]), "100-continue"))
    interim->append("HTTP/1.1 100 Continue\r\n\r\n");
  return true;
}

HttpRequestReader::Result HttpRequestReader::Refuse(int status, std::string_view code,
                                                    std::string message) {
  refusal_ = HttpReply{status, HttpErrorBody(code, message), {}};
  Discard();
  return Result::kRefused;
}

HttpRequestReader::Request HttpRequestReader::request() const {
  const auto& req = parser_->p.get();
  auto method = req.method_string();
  auto target = req.target();
  auto authorization = req[http::field::authorization];
  return Request{std::string_view(method.data(), method.size()),
                 std::string_view(target.data(), target.size()),
                 req.body(),
                 std::string_view(authorization.data(), authorization.size()),
                 parser_->p.keep_alive(),
                 req.version() < 11,
                 req.method() == http::verb::head};
}

void HttpRequestReader::Next() {
  exception_.clear();
  NewParser();
}

}  // namespace delayq::server
