#include "server/http_client.h"

#include <cstdlib>
#include <sstream>
#include <thread>

namespace delayq::testing {

namespace {

using Clock = std::chrono::steady_clock;

std::string Lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

}  // namespace

std::string HttpRequestText(std::string_view method, std::string_view target, std::string_view body,
                            std::string_view extra) {
  std::string r;
  r.append(method);
  r.push_back(' ');
  r.append(target);
  r.append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  if (!body.empty() || method == "POST") {
    r.append("Content-Type: application/json\r\nContent-Length: ");
    r.append(std::to_string(body.size()));
    r.append("\r\n");
  }
  r.append(extra);
  r.append("\r\n");
  r.append(body);
  return r;
}

HttpClient::HttpClient(uint16_t port, milliseconds timeout)
    : raw_(port, timeout), timeout_(timeout) {}

HttpClient::~HttpClient() { Close(); }

void HttpClient::Close() { raw_.Close(); }

bool HttpClient::Send(std::string_view bytes) { return raw_.Send(bytes); }

int HttpClient::ReadSome(Clock::time_point deadline) { return raw_.ReadInto(&buf_, deadline); }

HttpResponse HttpClient::Read(milliseconds timeout, bool head) {
  HttpResponse r;
  auto deadline = Clock::now() + timeout;
  size_t end;
  while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
    int got = ReadSome(deadline);
    if (got <= 0) {
      r.error = got == 0 ? "timeout" : "eof";
      r.body = buf_;
      return r;
    }
  }
  std::string_view head_text(buf_.data(), end);
  size_t line_end = head_text.find("\r\n");
  std::string_view status_line = head_text.substr(0, line_end);
  if (status_line.size() < 12 || status_line.substr(0, 5) != "HTTP/") {
    r.error = "bad status line: " + std::string(status_line);
    return r;
  }
  r.status = std::atoi(std::string(status_line.substr(9, 3)).c_str());
  std::string_view rest =
      line_end == std::string_view::npos ? std::string_view() : head_text.substr(line_end + 2);
  while (!rest.empty()) {
    size_t e = rest.find("\r\n");
    std::string_view line = rest.substr(0, e);
    size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      std::string_view v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      r.headers[Lower(std::string(line.substr(0, colon)))] = std::string(v);
    }
    if (e == std::string_view::npos) break;
    rest.remove_prefix(e + 2);
  }
  size_t body_len = head ? 0 : static_cast<size_t>(std::atoll(r.Header("content-length").c_str()));
  size_t need = end + 4 + body_len;
  while (buf_.size() < need) {
    int got = ReadSome(deadline);
    if (got <= 0) {
      r.error = got == 0 ? "timeout in body" : "eof in body";
      return r;
    }
  }
  r.body = buf_.substr(end + 4, body_len);
  buf_.erase(0, need);
  r.ok = true;
  if (r.status == 100) return Read(timeout, head);  // an interim reply
  return r;
}

HttpResponse HttpClient::Call(std::string_view method, std::string_view target,
                              std::string_view body, std::string_view extra) {
  if (!Send(HttpRequestText(method, target, body, extra))) {
    HttpResponse r;
    r.error = "send failed";
    return r;
  }
  return Read(timeout_, method == "HEAD");
}

bool HttpClient::WaitClosed(milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    int got = ReadSome(deadline);
    if (got < 0) return true;
    if (got == 0) return false;
    buf_.clear();
  }
}

uint16_t HttpPortOf(const ServerProcess& server, milliseconds timeout, size_t from) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    std::string log = server.Log();
    size_t at = log.find("event=started", from);
    if (at != std::string::npos) {
      size_t h = log.find(" http=", at);
      if (h != std::string::npos) {
        size_t space = log.find(' ', h + 1);
        size_t colon = log.rfind(':', space);
        if (colon != std::string::npos && colon > h)
          return static_cast<uint16_t>(std::atoi(log.substr(colon + 1, space - colon - 1).c_str()));
      }
      return 0;
    }
    if (Clock::now() >= deadline) return 0;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

std::optional<double> MetricValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

}  // namespace delayq::testing
