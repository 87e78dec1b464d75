// The fuzz targets' TLS server certificate: self-signed, P-256, made at
// run time (tls_front_door_fuzz.cc, tls_session_fuzz.cc).
#ifndef DELAYQ_FUZZ_FUZZ_TLS_CERTIFICATE_H_
#define DELAYQ_FUZZ_FUZZ_TLS_CERTIFICATE_H_

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_check.h"
#include "server/tls.h"

namespace delayq {

// A self-signed P-256 certificate and its key, as PEM files in a fresh
// temporary directory.
inline server::TlsFiles MakeCertificate() {
  static char dir[] = "/tmp/delayq-tls-fuzz-XXXXXX";
  FUZZ_CHECK(mkdtemp(dir) != nullptr, "no temporary directory");
  EVP_PKEY* key = EVP_EC_gen("P-256");
  FUZZ_CHECK(key != nullptr, "no key");
  X509* cert = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("delayq-fuzz"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  FUZZ_CHECK(X509_sign(cert, key, EVP_sha256()) > 0, "cannot sign");
  server::TlsFiles files{std::string(dir) + "/cert.pem", std::string(dir) + "/key.pem", ""};
  FILE* f = std::fopen(files.cert.c_str(), "w");
  PEM_write_X509(f, cert);
  std::fclose(f);
  f = std::fopen(files.key.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(cert);
  EVP_PKEY_free(key);
  return files;
}

}  // namespace delayq

#endif  // DELAYQ_FUZZ_FUZZ_TLS_CERTIFICATE_H_
