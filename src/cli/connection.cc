#include "cli/connection.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>

#include "delayq/duration.h"

namespace delayq::cli {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using tcp = boost::asio::ip::tcp;

Connection::Connection(ServerAddress address, milliseconds io_timeout)
    : address_(std::move(address)), io_timeout_(io_timeout), stream_(io_) {}

Connection::~Connection() { Close(); }

void Connection::Close() {
  if (!open_) return;
  boost::system::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
  open_ = false;
  buf_.clear();
  http_buffer_.clear();
}

std::optional<Failure> Connection::Connect() {
  if (open_) return std::nullopt;
  tcp::resolver resolver(io_);
  boost::system::error_code ec;
  auto endpoints = resolver.resolve(address_.host, std::to_string(address_.port),
                                    tcp::resolver::numeric_service, ec);
  if (ec) return Failure{Exit::kIo, "cannot resolve '" + address_.host + "': " + ec.message()};
  stream_.expires_after(io_timeout_);
  boost::system::error_code result = boost::asio::error::would_block;
  stream_.async_connect(
      endpoints, [&result](boost::system::error_code e, const tcp::endpoint&) { result = e; });
  io_.restart();
  io_.run();
  if (result) {
    stream_.close();
    std::string why = result == boost::beast::error::timeout
                          ? "no answer within " + FormatDuration(io_timeout_.count())
                          : result.message();
    return Failure{Exit::kIo, "cannot connect to " + address_.ToString() + ": " + why};
  }
  stream_.socket().set_option(tcp::no_delay(true), ec);
  open_ = true;
  return std::nullopt;
}

Failure Connection::IoFailure(const boost::system::error_code& ec, milliseconds waited) {
  Close();
  if (ec == boost::beast::error::timeout)
    return Failure{Exit::kIo, "no reply from " + address_.ToString() + " within " +
                                  FormatDuration(waited.count())};
  if (ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset ||
      ec == boost::asio::error::broken_pipe)
    return Failure{Exit::kIo, "the server closed the connection (" + address_.ToString() + ")"};
  return Failure{Exit::kIo, "connection to " + address_.ToString() + " failed: " + ec.message()};
}

std::optional<Failure> Connection::Write(std::string_view bytes) {
  if (auto f = Connect()) return f;
  auto ec = Run(
      [&](auto handler) {
        boost::asio::async_write(stream_, boost::asio::buffer(bytes.data(), bytes.size()),
                                 std::move(handler));
      },
      io_timeout_);
  if (ec) return IoFailure(ec, io_timeout_);
  return std::nullopt;
}

std::optional<Failure> Connection::ReadMore(milliseconds left, milliseconds allowed) {
  char chunk[16384];
  size_t n = 0;
  auto ec = Run(
      [&](auto handler) {
        stream_.async_read_some(boost::asio::buffer(chunk, sizeof chunk), std::move(handler));
      },
      left, &n);
  if (ec) return IoFailure(ec, allowed);
  buf_.append(chunk, n);
  return std::nullopt;
}

std::optional<Failure> Connection::ReadLine(std::string* line, milliseconds extra) {
  if (!open_) return Failure{Exit::kIo, "not connected to " + address_.ToString()};
  const milliseconds allowed = io_timeout_ + extra;
  const auto deadline = Clock::now() + allowed;
  size_t eol;
  while ((eol = buf_.find("\r\n")) == std::string::npos) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return IoFailure(boost::beast::error::timeout, allowed);
    if (auto f = ReadMore(left, allowed)) return f;
  }
  line->assign(buf_, 0, eol);
  buf_.erase(0, eol + 2);
  return std::nullopt;
}

std::optional<Failure> Connection::ReadExactly(size_t n, std::string* out) {
  if (!open_) return Failure{Exit::kIo, "not connected to " + address_.ToString()};
  const auto deadline = Clock::now() + io_timeout_;
  while (buf_.size() < n) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return IoFailure(boost::beast::error::timeout, io_timeout_);
    if (auto f = ReadMore(left, io_timeout_)) return f;
  }
  out->assign(buf_, 0, n);
  buf_.erase(0, n);
  return std::nullopt;
}

}  // namespace delayq::cli
