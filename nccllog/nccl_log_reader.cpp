#include "nccllog/nccl_log_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "util/private_file.h"

namespace gpudiag {
namespace {

bool wanted_in_dir(std::string_view name) {
  return name.rfind("nccl", 0) == 0 || (name.size() > 4 && name.compare(name.size() - 4, 4, ".log") == 0);
}

// Returns false when the byte budget ran out.
// `fd` is an open regular file, closed here.
bool read_open_file(NcclLogAnalyzer& a, int fd, const std::string& path, const ReadLimits& lim, std::uint64_t& total) {
  a.add_file_name(path);
  std::string buf(1 << 20, '\0');
  std::string carry;  // a line split across reads
  bool cut = false;   // skipping the rest of an over-long line
  bool more = true;
  while (true) {
    std::size_t want = buf.size();
    if (lim.max_total_bytes) {
      if (total >= lim.max_total_bytes) {
        more = false;
        a.set_truncated();
        break;
      }
      want = std::min<std::uint64_t>(want, lim.max_total_bytes - total);
    }
    ssize_t n = ::read(fd, buf.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      a.add_read_error(path + ": " + std::strerror(errno));
      break;
    }
    if (n == 0) break;
    total += static_cast<std::uint64_t>(n);
    a.add_bytes(static_cast<std::uint64_t>(n));
    std::string_view chunk(buf.data(), static_cast<std::size_t>(n));
    std::size_t start = 0;
    while (start < chunk.size()) {
      std::size_t nl = chunk.find('\n', start);
      std::string_view piece = chunk.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
      if (nl == std::string_view::npos) {
        if (!cut) {
          std::size_t room = lim.max_line - std::min(lim.max_line, carry.size());
          carry.append(piece.substr(0, room));
          if (piece.size() > room) cut = true;
        }
        break;
      }
      if (!carry.empty() || cut) {
        if (!cut) carry.append(piece.substr(0, lim.max_line - std::min(lim.max_line, carry.size())));
        a.add_line(carry, path);
        carry.clear();
        cut = false;
      } else {
        a.add_line(piece.substr(0, lim.max_line), path);
      }
      start = nl + 1;
    }
  }
  if (!carry.empty()) a.add_line(carry, path);  // a last line without a newline
  ::close(fd);
  return more;
}

bool read_file(NcclLogAnalyzer& a, const std::string& path, const ReadLimits& lim, std::uint64_t& total) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    a.add_read_error(path + ": " + std::strerror(errno));
    return true;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    a.add_read_error(path + ": not a regular file");
    ::close(fd);
    return true;
  }
  return read_open_file(a, fd, path, lim, total);
}

// A bound on the names one dir contributes: a dir of millions of names costs srun no more.
constexpr std::size_t kMaxDirNames = 1u << 20;

}  // namespace

void read_nccl_logs(NcclLogAnalyzer& a, const std::vector<std::string>& paths, const ReadLimits& limits) {
  std::uint64_t total = 0;
  for (const auto& path : paths) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      a.add_read_error(path + ": " + std::strerror(errno));
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (!read_file(a, path, limits, total)) return;
      continue;
    }
    DIR* d = ::opendir(path.c_str());
    if (!d) {
      a.add_read_error(path + ": " + std::strerror(errno));
      continue;
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != ".." && wanted_in_dir(name)) names.push_back(name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      std::string full = path + (path.back() == '/' ? "" : "/") + n;
      struct stat fst;
      if (::lstat(full.c_str(), &fst) != 0 || !S_ISREG(fst.st_mode)) continue;
      if (!read_file(a, full, limits, total)) return;
    }
  }
}

void read_nccl_logs_in_dir(NcclLogAnalyzer& a, int dir_fd, const std::string& shown, uid_t owner,
                           const ReadLimits& limits) {
  std::vector<std::string> names = dir_names(dir_fd, wanted_in_dir, kMaxDirNames);
  std::sort(names.begin(), names.end());
  std::uint64_t total = 0;
  for (const auto& n : names) {
    const OpenedFile f = open_regular_file(dir_fd, n.c_str(), &owner);
    if (f.fd < 0) continue;
    if (!read_open_file(a, f.fd, shown + (!shown.empty() && shown.back() == '/' ? "" : "/") + n, limits, total))
      return;
  }
}

bool has_nccl_logs(int dir_fd) {
  return !dir_names(dir_fd, [](std::string_view n) { return n.substr(0, 5) == "nccl."; }, 1).empty();
}

}  // namespace gpudiag
