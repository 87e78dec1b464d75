#include "server/beanstalk_tls_connection.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>

#include "server/beanstalk_server.h"

namespace delayq::server {

namespace asio = boost::asio;
using asio::ip::tcp;

BeanstalkTlsConnection::BeanstalkTlsConnection(BeanstalkServer& server,
                                               std::shared_ptr<asio::ssl::context> tls,
                                               std::unique_ptr<TlsStream> stream)
    : server_(server),
      tls_(std::move(tls)),
      stream_(std::move(stream)),
      handler_(
          server.ctx_, [this] { OnWake(); }, PeerAddress(stream_->next_layer())) {
  boost::system::error_code ec;
  stream_->next_layer().set_option(tcp::no_delay(true), ec);
}

BeanstalkTlsConnection::~BeanstalkTlsConnection() = default;

void BeanstalkTlsConnection::Shutdown() {
  draining_ = true;
  if (!writing_ && handler_.output().empty() && !handler_.reply_pending()) return Goodbye();
}

bool BeanstalkTlsConnection::CommandsWait() const {
  return handler_.blocked() || handler_.output_full() ||
         (server_.ctx_.RepliesOverBudget() && Held() > 0);
}

void BeanstalkTlsConnection::Account() {
  const size_t held = closed_ ? 0 : Held();
  if (held != accounted_) server_.ctx_.AccountReplies(accounted_, held);
  accounted_ = held;
}

void BeanstalkTlsConnection::Read() {
  if (reading_ || closed_ || saying_goodbye_ || draining_ || peer_closed_) return;
  // Back-pressure, as on plaintext: input is read ahead up to the limit.
  if (CommandsWait() && handler_.input().size() >= server_.input_limit_) return;
  reading_ = true;
  stream_->async_read_some(asio::buffer(rbuf_),
                           [self = shared_from_this()](const boost::system::error_code& ec,
                                                       size_t n) { self->OnRead(ec, n); });
}

void BeanstalkTlsConnection::OnRead(const boost::system::error_code& ec, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (saying_goodbye_) return SendCloseNotify();
  if (!ec) {
    handler_.input().Append(std::string_view(rbuf_.data(), n));
  } else if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
    peer_closed_ = true;  // answer what came before the end, then close
  } else {
    return Close();
  }
  Run();
}

void BeanstalkTlsConnection::Run() {
  if (closed_ || saying_goodbye_) return;
  Account();
  const bool tight = server_.ctx_.RepliesOverBudget();
  if (!tight || Held() == 0) {
    handler_.set_output_limit(tight ? 1 : BeanstalkHandler::kMaxOutput);
    handler_.Process();
  }
  // A waiting reserve is answered TIMED_OUT at the client's end, and when
  // the input behind it reaches the limit (it would not be read further).
  if (handler_.reserving() && (peer_closed_ || handler_.input().size() >= server_.input_limit_)) {
    handler_.CancelReserve();
    if (!peer_closed_)
      asio::post(stream_->get_executor(), [self = shared_from_this()] {
        self->Run();  // the commands behind it
      });
  }
  Account();
  if (!writing_ && !handler_.output().empty()) return Write();  // its end runs us again
  if (!writing_ && !handler_.reply_pending()) {
    if (handler_.want_close() || draining_ || (peer_closed_ && !handler_.blocked()))
      return Goodbye();
  }
  Read();
}

void BeanstalkTlsConnection::Write() {
  writing_ = true;
  sending_.swap(handler_.output());
  asio::async_write(*stream_, asio::buffer(sending_),
                    [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                      self->writing_ = false;
                      if (self->closed_) return;
                      if (ec) return self->Close();
                      self->sending_.clear();
                      self->Run();
                    });
  Read();  // reads go on while the replies leave
}

void BeanstalkTlsConnection::OnWake() {
  if (closed_ || wake_posted_) return;
  auto self = weak_from_this().lock();
  if (self == nullptr) return;  // being destroyed
  wake_posted_ = true;
  asio::post(stream_->get_executor(), [self] {
    self->wake_posted_ = false;
    self->Run();
  });
}

void BeanstalkTlsConnection::Goodbye() {
  if (closed_ || saying_goodbye_) return;
  saying_goodbye_ = true;
  handler_.EndSession();  // its reserved jobs are ready again now
  goodbye_timer_ = std::make_unique<asio::steady_timer>(stream_->get_executor());
  goodbye_timer_->expires_after(kGoodbyeWait);
  goodbye_timer_->async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!ec && self != nullptr) self->Close();
  });
  // One operation that reads at a time on the SSL stream: a read under
  // way is cancelled first, and its end sends the close_notify.
  if (reading_) {
    boost::system::error_code ignored;
    stream_->next_layer().cancel(ignored);
    return;
  }
  SendCloseNotify();
}

void BeanstalkTlsConnection::SendCloseNotify() {
  stream_->async_shutdown(
      [self = shared_from_this()](const boost::system::error_code&) { self->Close(); });
}

void BeanstalkTlsConnection::Close() {
  if (closed_) return;
  closed_ = true;
  Account();
  if (goodbye_timer_ != nullptr) goodbye_timer_->cancel();
  boost::system::error_code ec;
  stream_->next_layer().shutdown(tcp::socket::shutdown_both, ec);
  stream_->next_layer().close(ec);
  server_.Forget(this);
}

}  // namespace delayq::server
