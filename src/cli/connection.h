// One TCP connection of the command-line client, with a deadline on every
// step. Each step starts an asynchronous Asio operation and runs a private
// io_context until it completes or its deadline closes the socket (Beast's
// tcp_stream timer): blocking sockets have no deadline that Asio honours.
//
// Failures are Exit::kIo, with a message naming the server.
//
// Thread: a Connection belongs to one thread.
#ifndef DELAYQ_CLI_CONNECTION_H_
#define DELAYQ_CLI_CONNECTION_H_

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "cli/client.h"
#include "cli/util.h"

namespace delayq::cli {

class Connection {
 public:
  Connection(ServerAddress address, std::chrono::milliseconds io_timeout);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool is_open() const { return open_; }
  const ServerAddress& address() const { return address_; }
  std::chrono::milliseconds io_timeout() const { return io_timeout_; }

  // Connects, unless connected. nullopt on success.
  std::optional<Failure> Connect();
  // Writes all of `bytes`.
  std::optional<Failure> Write(std::string_view bytes);
  // The next line, without its "\r\n". `extra` is time allowed on top of the
  // I/O timeout (a reserve that waits).
  std::optional<Failure> ReadLine(std::string* line,
                                  std::chrono::milliseconds extra = std::chrono::milliseconds(0));
  // The next `n` bytes.
  std::optional<Failure> ReadExactly(size_t n, std::string* out);
  void Close();

  // For Beast's HTTP reads and writes: the stream, its read buffer, and a
  // way to run one operation to its end. `start` is called with a
  // completion handler taking (error_code, size_t); the size lands in
  // *bytes when given.
  boost::beast::tcp_stream& stream() { return stream_; }
  boost::beast::flat_buffer& http_buffer() { return http_buffer_; }
  template <typename Start>
  boost::system::error_code Run(Start&& start, std::chrono::milliseconds timeout,
                                std::size_t* bytes = nullptr) {
    stream_.expires_after(timeout);
    boost::system::error_code result = boost::asio::error::would_block;
    start([&result, bytes](boost::system::error_code ec, std::size_t n) {
      result = ec;
      if (bytes != nullptr) *bytes = n;
    });
    io_.restart();
    io_.run();
    return result;
  }
  // The failure for an error of a read or write, closing the connection.
  Failure IoFailure(const boost::system::error_code& ec, std::chrono::milliseconds waited);

 private:
  // Reads once more into buf_, waiting up to `left`; a timeout is reported
  // as no reply within `allowed` (the whole wait).
  std::optional<Failure> ReadMore(std::chrono::milliseconds left,
                                  std::chrono::milliseconds allowed);

  ServerAddress address_;
  std::chrono::milliseconds io_timeout_;
  boost::asio::io_context io_;
  boost::beast::tcp_stream stream_;
  bool open_ = false;
  std::string buf_;  // beanstalkd: received, not yet returned
  boost::beast::flat_buffer http_buffer_;
};

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_CONNECTION_H_
