#include "stacks/verdict/step_reports.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/control_bytes.h"

namespace gpudiag {

std::string hang_report_node(std::string_view n) {
  constexpr std::string_view pre = "hang.", suf = ".txt";
  if (n.size() <= pre.size() + suf.size() || n.substr(0, pre.size()) != pre || n.substr(n.size() - suf.size()) != suf)
    return "";
  std::string_view middle = n.substr(pre.size(), n.size() - pre.size() - suf.size());
  return std::string(middle.substr(0, middle.find('.')));
}

StepReports read_step_reports(const std::string& dir, uid_t uid) {
  StepReports out;
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return out;
  DIR* d = ::fdopendir(dfd);
  if (!d) {
    ::close(dfd);
    return out;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (!hang_report_node(e->d_name).empty() && names.size() < kMaxReports) names.emplace_back(e->d_name);
  std::sort(names.begin(), names.end());
  std::string buf;
  std::size_t total = 0;
  for (const auto& name : names) {
    if (total >= kMaxStepBytes || out.ranks.size() >= kMaxStepRanks) {
      out.problems.push_back(escape_control(name) + " and the reports after it: not read, the merge's limit (" +
                             std::to_string(kMaxStepBytes >> 20) + " MiB, " + std::to_string(kMaxStepRanks) +
                             " ranks) was reached");
      break;
    }
    int fd = ::openat(::dirfd(d), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid) {
      out.problems.push_back(escape_control(name) + ": " +
                             (fd < 0 ? std::string(std::strerror(errno)) : std::string("not a file of the job's owner")));
      if (fd >= 0) ::close(fd);
      continue;
    }
    buf.assign(std::min<std::size_t>({static_cast<std::size_t>(st.st_size), kMaxReportBytes, kMaxStepBytes - total}),
               '\0');
    std::size_t got = 0;
    while (got < buf.size()) {
      ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    buf.resize(got);
    total += got;
    ++out.nodes;
    auto ranks = rank_stacks_in_report(buf, kMaxStepRanks - out.ranks.size());
    for (auto& r : ranks) out.ranks.push_back(std::move(r));
  }
  ::closedir(d);
  return out;
}

}  // namespace gpudiag
