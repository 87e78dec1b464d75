// One beanstalkd-protocol connection over TLS (docs/security.md, "TLS"):
// Asio's SSL stream, its handshake done by the FrontDoor (front_door.h),
// and the same BeanstalkHandler as the plaintext BeanstalkConnection. Each
// read's decrypted bytes go into the handler's input, every complete
// command runs, and the replies leave in one write. The limits are the
// plaintext connection's: while a reserve waits, or replies wait for a
// client that does not read them, or the server's reply budget is used up,
// input is read no further than the server's input limit; past the budget
// a connection that holds replies runs no command. A connection that is to
// end (quit, the client's end, the server's stop) sends its replies first.
//
// Thread: the loop thread of the server's io_context only.
#ifndef DELAYQ_SERVER_BEANSTALK_TLS_CONNECTION_H_
#define DELAYQ_SERVER_BEANSTALK_TLS_CONNECTION_H_

#include <array>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "server/beanstalk_handler.h"
#include "server/front_door.h"
#include "server/listener.h"

namespace delayq::server {

class BeanstalkServer;

class BeanstalkTlsConnection : public ListenerConnection,
                               public std::enable_shared_from_this<BeanstalkTlsConnection> {
 public:
  // `stream` has done its handshake; `tls` is its context.
  BeanstalkTlsConnection(BeanstalkServer& server, std::shared_ptr<boost::asio::ssl::context> tls,
                         std::unique_ptr<TlsStream> stream);
  ~BeanstalkTlsConnection() override;

  void Start() override { Run(); }
  void CloseNow() override { Close(); }
  void Shutdown() override;

 private:
  bool CommandsWait() const;
  // Bytes of replies held: written by the handler, or being written.
  size_t Held() const { return handler_.output().size() + sending_.size(); }
  void Account();
  void Read();
  void OnRead(const boost::system::error_code& ec, size_t n);
  // Runs the commands that can run, starts a write of their replies, and
  // reads on when it may.
  void Run();
  void Write();
  void OnWake();
  // The connection ends after its replies (quit, the client's end, the
  // server's stop): TLS's close_notify goes out, and the socket closes
  // when the client answers it or closes, or after kGoodbyeWait.
  void Goodbye();
  void SendCloseNotify();
  void Close();

  static constexpr size_t kReadChunk = 16 * 1024;  // a TLS record's most
  static constexpr std::chrono::milliseconds kGoodbyeWait{1000};

  BeanstalkServer& server_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::unique_ptr<TlsStream> stream_;
  BeanstalkHandler handler_;
  std::array<char, kReadChunk> rbuf_;  // a read's bytes, until they join the input
  std::string sending_;                // replies being written
  size_t accounted_ = 0;               // Held() as the server counts it (Account)
  bool reading_ = false, writing_ = false, closed_ = false, draining_ = false;
  bool peer_closed_ = false, wake_posted_ = false;
  bool saying_goodbye_ = false;
  std::unique_ptr<boost::asio::steady_timer> goodbye_timer_;  // while saying goodbye
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_BEANSTALK_TLS_CONNECTION_H_
