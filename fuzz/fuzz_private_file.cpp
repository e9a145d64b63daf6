// util/private_file.h against names and paths a neighbour or an admin's typo could
// give: the first 4 bytes are a directory's mode and two uids for the private-dir rule,
// the rest a path. Properties: the rule is exactly "a real dir of the user that no one
// else may write"; a path splits into a dir and a name that put it back together; and
// whatever the name, a new file is made in the scratch dir itself or nowhere: never
// outside it, never over anything, always 0600.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz/fuzz_input.h"
#include "util/private_file.h"

namespace {

std::string g_base;  // holds only "d", the scratch dir
int g_dfd = -1;

std::size_t entries(const std::string& dir) {
  std::size_t n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
    ::closedir(d);
  }
  return n;
}

void remove_scratch() {
  if (g_base.empty()) return;
  ::rmdir((g_base + "/d").c_str());
  ::rmdir(g_base.c_str());
}

constexpr char kPrefix[] = "private_file-scratch-";

// In the working dir (ctest's: the build tree), named by pid: a run that crashed
// (abort skips atexit) leaves its empty dirs there, and the next run removes them.
void make_scratch() {
  if (DIR* d = ::opendir(".")) {
    while (dirent* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, kPrefix, sizeof kPrefix - 1) != 0) continue;
      const long pid = std::atol(e->d_name + sizeof kPrefix - 1);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0) continue;
      ::rmdir((std::string(e->d_name) + "/d").c_str());
      ::rmdir(e->d_name);
    }
    ::closedir(d);
  }
  g_base = kPrefix + std::to_string(::getpid());
  if (::mkdir(g_base.c_str(), 0700) != 0) std::abort();
  if (::mkdir((g_base + "/d").c_str(), 0700) != 0) std::abort();
  g_dfd = ::open((g_base + "/d").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g_dfd < 0) std::abort();
  std::atexit(remove_scratch);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpudiag;
  if (g_dfd < 0) make_scratch();
  if (size < 4) return 0;
  static const mode_t kTypes[] = {S_IFDIR, S_IFLNK, S_IFREG, S_IFIFO};
  const mode_t mode = (static_cast<mode_t>(data[0] | (data[1] << 8)) & 07777) | kTypes[data[1] >> 6];
  const uid_t owner = data[2] % 4, uid = data[3] % 4;
  const bool ok = judge_private_dir(mode, owner, uid) == DirVerdict::ok;
  GPUDIAG_FUZZ_CHECK(ok == (S_ISDIR(mode) && owner == uid && !(mode & (S_IWGRP | S_IWOTH))));
  if (judge_private_dir(mode, owner, uid, DirPrivacy::no_other_access) == DirVerdict::ok)
    GPUDIAG_FUZZ_CHECK(ok && !(mode & 077));

  const std::string path(reinterpret_cast<const char*>(data + 4), size - 4);
  const FilePlace p = place_of(path);
  GPUDIAG_FUZZ_CHECK(p.name.find('/') == std::string::npos);
  GPUDIAG_FUZZ_CHECK(!p.dir.empty());
  if (path.find('/') == std::string::npos) GPUDIAG_FUZZ_CHECK(p.dir == "." && p.name == path);
  else GPUDIAG_FUZZ_CHECK(p.dir + "/" + p.name == path || (p.dir == "/" && "/" + p.name == path));
  if (is_plain_name(p.name))
    GPUDIAG_FUZZ_CHECK(p.name != "." && p.name != ".." && p.name.find('\0') == std::string::npos);

  // The whole input as one name (as far as a C string goes).
  const char* name = path.c_str();
  const int fd = create_new_file(g_dfd, name);
  if (!is_plain_name(std::string_view(name))) GPUDIAG_FUZZ_CHECK(fd < 0 && errno == EINVAL);
  if (fd >= 0) {
    struct stat st;
    GPUDIAG_FUZZ_CHECK(::fstatat(g_dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0);
    GPUDIAG_FUZZ_CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == kPrivateFileMode);
    // Taken now: never opened again.
    GPUDIAG_FUZZ_CHECK(create_new_file(g_dfd, name) < 0 && errno == EEXIST);
    ::close(fd);
    ::unlinkat(g_dfd, name, 0);
  }
  GPUDIAG_FUZZ_CHECK(entries(g_base + "/d") == 0);
  GPUDIAG_FUZZ_CHECK(entries(g_base) == 1);
  return 0;
}
