// TLS on the listeners (docs/security.md, "TLS"): the server's certificate
// and key, and the CA that client certificates must chain to, loaded into
// an OpenSSL context through Asio; and how a connection's first byte tells
// TLS from plaintext.
//
// A connection's context is the one in force when it was accepted: it
// holds a reference, so a reload (SIGHUP) serves new connections the new
// files while the open ones go on.
//
// Thread: any; a context is used by the loop thread once made.
#ifndef DELAYQ_SERVER_TLS_H_
#define DELAYQ_SERVER_TLS_H_

#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "delayq/status.h"

namespace delayq::server {

struct TlsFiles {
  std::string cert;       // PEM: the server's certificate, then its chain
  std::string key;        // PEM: its private key
  std::string client_ca;  // PEM: CAs client certificates must chain to ("": none asked)
};

// A server context: TLS 1.2 or later, the certificate chain and key of
// `files` (which must match), and with `client_ca` set, a client
// certificate required and verified against it. kInvalidArgument naming
// the file and OpenSSL's reason when a file is missing, unreadable, not
// PEM, or the key is not the certificate's.
Result<std::shared_ptr<boost::asio::ssl::context>> LoadTlsContext(const TlsFiles& files);

// A TLS record of type handshake opens every TLS connection (its
// ClientHello); no beanstalkd command and no HTTP method starts with it.
inline constexpr uint8_t kTlsHandshakeByte = 0x16;

// The certificate's subject and serial, for the log ("subject=... serial=...").
std::string TlsCertificateSummary(boost::asio::ssl::context& ctx);

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_TLS_H_
