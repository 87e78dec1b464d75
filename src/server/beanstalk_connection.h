// One beanstalkd-protocol connection of BeanstalkServer (beanstalk_server.h):
// its non-blocking socket, watched level-triggered by the server's
// SocketPoller, and the BeanstalkHandler that runs its commands. One recv
// when the socket is readable goes straight into the handler's input
// buffer, every complete command runs, and all replies leave with one send
// (queued in the poller's batch when it batches: io_batch.h). While replies
// wait for a client that does not read them, or a reserve waits, input is
// read no further than the server's input limit (back-pressure). A
// connection that is to end sends every reply first, then finishes
// (Finish) or closes.
//
// Over TLS (docs/security.md, "TLS") the connection is the same: its
// socket calls are batched with the plaintext ones; what recv brings is
// decrypted into the handler's input, and the replies are encrypted as
// they leave (TlsSession, tls_session.h). The handshake runs within the
// server's handshake timeout; a connection that ends sends its
// close_notify after its last reply.
//
// The server owns its connections (Listener); a connection reaches the
// server's poller, limits and wake-up queue as its friend.
//
// Thread: the loop thread of the server's io_context only.
#ifndef DELAYQ_SERVER_BEANSTALK_CONNECTION_H_
#define DELAYQ_SERVER_BEANSTALK_CONNECTION_H_

#include <sys/types.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/beanstalk_handler.h"
#include "server/byte_buffer.h"
#include "server/listener.h"
#include "server/socket_poller.h"
#include "server/tls_session.h"

namespace delayq::server {

class BeanstalkServer;

class BeanstalkConnection : public ListenerConnection,
                            public std::enable_shared_from_this<BeanstalkConnection>,
                            public SocketWatcher {
 public:
  // `tls`: the context to serve TLS with (the client's first byte opened
  // a handshake: front_door.h); null for plaintext.
  BeanstalkConnection(BeanstalkServer& server, boost::asio::ip::tcp::socket socket,
                      std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  ~BeanstalkConnection() override;

  // Registers the socket with the server's poller; closes at once if that
  // fails.
  void Start() override;
  void CloseNow() override { Close(); }

  // Finish what is in flight, then close.
  void Shutdown() override;

  // Runs the connection after OnWake asked the server to (BeanstalkServer::Wake).
  void Woken();
  void OnSocketEvents(uint32_t events) override;

 private:
  // I/O on the non-blocking socket, level-triggered through the server's
  // SocketPoller: one recv when it is readable, then every complete command
  // runs and all replies leave with one send.
  bool WantRead();
  bool CommandsWait() const;

  // Bytes of replies this connection holds: written by the handler, not
  // yet taken by the kernel.
  size_t Held() const;

  // Brings the server's count of the replies held up to date.
  void Account();
  void UpdateInterest();

  // One recv into the input buffer: made at once, or queued in the
  // poller's batch (OnIoDone brings the result).
  void Read();

  // What one recv may fill: the buffer's free tail, but no further than
  // the input limit (or one chunk past what is there).
  size_t Room();

  // n: what the recv returned (bytes, or -errno).
  void Received(ssize_t n);

  // Over TLS: decrypts what came (cipher_in_) into the handler's input.
  // False when the connection closed (a failed handshake or a bad record).
  bool Decipher();
  void Run();
  void Settle();

  // Frees empty buffers: large ones (a burst is over), and when the
  // server's reply budget is used up, every reply buffer (what connections
  // keep for their next replies is memory too).
  void ReleaseBuffers();
  void OnIoDone(bool send, ssize_t result) override;

  // The handler produced output outside of Process (a reserve was served,
  // the store released a reply): the server runs us soon, with the others
  // woken meanwhile, their sends in one batch.
  void OnWake();

  // Sends what the handler wrote; what the kernel does not take waits in
  // pending_ for EPOLLOUT. Returns false when the send is queued in the
  // poller's batch: the handler's output moved to sending_, where it stays
  // untouched until OnIoDone (the handler may write more meanwhile).
  bool Flush();

  // n: what the send of sending_ returned (bytes, or -errno).
  void Sent(ssize_t n);
  void WritePending();

  // Every reply is with the kernel and the connection is to end (quit, or
  // the server stops). A socket closed while input the server never read
  // waits in it, or reaches it later, is reset by the kernel, and whatever
  // of the replies it has not yet delivered is lost. So: the input waiting
  // now is read and dropped; when none was there and the kernel holds no
  // reply the client has not acknowledged, the socket closes at once (a
  // later reset loses nothing). Otherwise the connection finishes: its
  // session ends (its reserved jobs are ready again), the write side is
  // shut (the client reads every reply, then the end), what comes in is
  // dropped, and it closes at the client's end, once the send queue is
  // empty, or when the queue has not shrunk for kLingerChecks checks
  // (the server's stop closes what is left after its grace: CloseAll).
  void Finish();
  void CheckLinger();

  // Over TLS: queues the close_notify after the last reply. False when
  // the kernel did not take it at once: the connection finishes once
  // EPOLLOUT has sent the rest.
  bool SayCloseNotify();
  // The client is gone or going (peer_closed_) and every reply is sent:
  // over TLS a close_notify first, if the kernel takes it at once (a client
  // that sent its own waits for it), then Close.
  void CloseAfterClient();

  // Bytes of replies in the kernel that the client has not acknowledged
  // (SIOCOUTQ); 0 when the kernel does not say.
  int Unacknowledged() const;

  // Closed, or finishing: no command runs any more.
  bool ended() const { return closed_ || finishing_; }

  // A finishing connection's input: dropped, up to the client's end.
  void DropInput();

  // Reads what waits in the socket (kMaxDropReads chunks at most) and drops
  // it: 1 when some came, 0 when none did, -1 at the client's end or an
  // error.
  int DropWaitingInput();
  void Close();

  static constexpr uint32_t kUnregistered = ~uint32_t{0};

  BeanstalkServer& server_;
  int fd_ = -1;
  uint32_t interest_ = kUnregistered;  // what the poller watches for
  BeanstalkHandler handler_;
  std::string sending_;  // replies being sent (swapped out of the handler's output)
  std::string pending_;  // the rest of a reply the kernel did not take at once
  size_t pending_sent_ = 0;
  size_t recv_room_ = 0;  // bytes the recv may fill
  size_t accounted_ = 0;  // Held() as the server counts it (Account)
  bool writing_ = false, closed_ = false, draining_ = false;
  bool finishing_ = false;  // replies done, write side shut, input dropped (Finish)
  std::unique_ptr<boost::asio::steady_timer> linger_timer_;  // while finishing
  int linger_left_ = 0;                                      // SIOCOUTQ at the last check
  int linger_stalls_ = 0;                                    // checks since it last shrank
  bool recv_queued_ = false, send_queued_ = false;           // in the poller's batch
  bool stopped_full_ = false;  // Process stopped at a full output buffer
  bool wake_posted_ = false;
  bool peer_closed_ = false;
  // Over TLS (null for plaintext): the session, what recv brought before
  // it is decrypted, the handshake's timer, the client's address for the
  // log, and whether the close_notify has been queued.
  std::unique_ptr<TlsSession> tls_;
  ByteBuffer cipher_in_;
  TlsHandshakeDeadline handshake_deadline_;
  std::string peer_;
  bool close_notify_queued_ = false;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_BEANSTALK_CONNECTION_H_
