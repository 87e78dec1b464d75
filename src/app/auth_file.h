// The token file of --auth-file (docs/security.md, "The token file"): TOML,
// one [[token]] table per token:
//
//   [[token]]
//   name = "orders-producer"
//   sha256 = "<64 hex digits: the SHA-256 of the secret>"
//   topics = ["orders.*"]          # patterns: `*` stands for any run
//   rights = ["produce"]           # produce, consume, admin
//   rate = 100                     # requests per second (optional)
//   burst = 200                    # at once (optional; default: rate)
//
// Nothing else is allowed in it: an unknown key is an error (a misspelt
// `rights` must not leave a token with fewer checks than meant).
//
// Thread: any.
#ifndef DELAYQ_APP_AUTH_FILE_H_
#define DELAYQ_APP_AUTH_FILE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "server/access.h"

namespace delayq::app {

// The tokens of a token file's text; kInvalidArgument with a message that
// names the line and the token for anything malformed. `source` names the
// file in messages.
Result<std::vector<Token>> ParseAuthFile(std::string_view text, std::string_view source);

// The access policy of --auth-file and --trusted-networks: the file read
// and parsed (no file: no tokens), with the networks.
Result<std::shared_ptr<const server::AccessPolicy>> LoadAccessPolicy(
    const std::string& auth_file, const std::string& trusted_networks);

}  // namespace delayq::app

#endif  // DELAYQ_APP_AUTH_FILE_H_
