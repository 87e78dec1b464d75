// Black-box test helpers for delayqd's HTTP/JSON API: a small blocking
// HTTP/1.1 client over one raw TCP connection (so tests control exactly
// what is sent: pipelining, partial writes, oversized headers), and a way to
// learn the HTTP port of a ServerProcess started with `--http-port 0`.
// The connection is a RawClient's: over TLS when the tests run so
// (DELAYQ_TEST_TLS=1, the ctest entry http_over_tls; server_process.h).
//
// Thread: each object belongs to one thread.
#ifndef DELAYQ_TESTS_SERVER_HTTP_CLIENT_H_
#define DELAYQ_TESTS_SERVER_HTTP_CLIENT_H_

#include <rapidjson/document.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "server/server_process.h"

namespace delayq::testing {

struct HttpResponse {
  bool ok = false;  // a whole response arrived
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string error;  // when !ok: what went wrong ("timeout", "eof", ...)
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// A reply body parsed as JSON (a parse error shows in the document).
inline rapidjson::Document Json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  return d;
}

// The "code" of an error reply ({"error":{"code",...}}), or "<none>".
inline std::string ErrorCode(const HttpResponse& r) {
  auto d = Json(r.body);
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("error")) return "<none>";
  return d["error"]["code"].GetString();
}

// "METHOD target HTTP/1.1" with Host, Content-Length (when a body is
// given or the method is POST) and `extra` header lines ("Name: v\r\n").
std::string HttpRequestText(std::string_view method, std::string_view target,
                            std::string_view body = {}, std::string_view extra = {});

class HttpClient {
 public:
  explicit HttpClient(uint16_t port, milliseconds timeout = milliseconds(10000));
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  bool ok() const { return raw_.ok(); }
  int fd() const { return raw_.fd(); }
  bool Send(std::string_view bytes);
  // One response; `head` true for the reply to a HEAD request (no body).
  HttpResponse Read(milliseconds timeout, bool head = false);
  HttpResponse Read() { return Read(timeout_); }
  HttpResponse Call(std::string_view method, std::string_view target, std::string_view body = {},
                    std::string_view extra = {});
  // True when the server closes the connection within `timeout`.
  bool WaitClosed(milliseconds timeout);
  void Close();

 private:
  // Reads more into buf_; 1 got data, 0 timeout, -1 EOF or error.
  int ReadSome(std::chrono::steady_clock::time_point deadline);
  RawClient raw_;
  milliseconds timeout_;
  std::string buf_;
};

// The HTTP port delayqd logged in its `event=started` line (`http=ADDR:PORT`),
// waiting up to `timeout` for it; 0 when it does not appear. `from`: the
// first such line at or past this byte of the log (a ServerProcess started
// again appends to the log of its earlier runs).
uint16_t HttpPortOf(const ServerProcess& server, milliseconds timeout = milliseconds(10000),
                    size_t from = 0);

// The value of the sample `series` ("name" or "name{labels}", spelled as the
// server writes it) in a Prometheus exposition (GET /metrics), or nullopt if
// it has none.
std::optional<double> MetricValue(const std::string& text, const std::string& series);

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_HTTP_CLIENT_H_
