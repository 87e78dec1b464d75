// The nice values of this process's threads of a given name, read from
// /proc (Linux): for tests of threads that lower their own priority.
#ifndef DELAYQ_TESTS_THREAD_NICE_H_
#define DELAYQ_TESTS_THREAD_NICE_H_

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace delayq::testing {

// The calling thread's nice value.
inline int OwnNice() { return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid())); }

// One entry per live thread named `name`: its nice value (field 19 of
// /proc/self/task/TID/stat, after the name in parentheses).
inline std::vector<int> NiceOfThreadsNamed(std::string_view name) {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string got;
    std::getline(comm, got);
    if (got != name) continue;
    std::ifstream stat_file(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));  // from field 3, the state
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i) {
      if (i == 19) out.push_back(std::stoi(field));
    }
  }
  return out;
}

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_THREAD_NICE_H_
