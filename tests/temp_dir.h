// A temporary directory for a test (mkdtemp under /tmp), removed with
// everything in it when the object goes. path() is empty if mkdtemp failed.
#ifndef DELAYQ_TESTS_TEMP_DIR_H_
#define DELAYQ_TESTS_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace delayq::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/delayq-test-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_TEMP_DIR_H_
