#include "spank/watchdog/hang_diag_dir.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "spank/watchdog/hang_spread.h"
#include "util/control_bytes.h"
#include "util/deadline_child.h"
#include "util/private_file.h"

namespace gpudiag {
namespace {

constexpr int kSpareReportNames = 16;  // hang.<host>.<random>.txt names to try after a taken one

// What a child answers first, before any payload.
struct Outcome {
  char what = 0;  // 'k' done; 'o' the dir cannot be opened; 'p' not private; 'c' cannot create; 'w' cannot write; 't' taken
  int err = 0;    // errno of the step that failed ('k' from ask_torch: whether torch took it)
  int name = 0;   // which of the prepared names (write_report)
};

// The rest of this block runs in the child: plain syscalls only (util/deadline_child.h).

void answer(int out, const Outcome& o) { write_whole(out, &o, sizeof o); }

// The diag dir, opened once (util/private_file.h): what is made or read in it goes
// through this fd, so a dir renamed or replaced since the task checked it is never used
// by name (issue 21 A3).
int open_diag_dir(const char* dir, uid_t uid, Outcome& o) {
  const DirOpen d = open_private_dir(dir, uid);
  if (d.fd < 0) {
    o.what = d.not_private ? 'p' : 'o';
    o.err = d.err;
  }
  return d.fd;
}

// Back in the caller.

Outcome outcome_of(const std::string& got, std::string* rest = nullptr) {
  Outcome o;
  if (got.size() >= sizeof o) {
    std::memcpy(&o, got.data(), sizeof o);
    if (rest) *rest = got.substr(sizeof o);
  }
  return o;
}

std::string dir_problem(const std::string& dir, const Outcome& o) {
  if (o.what == 'o') return "cannot open the diag dir " + dir + ": " + std::strerror(o.err);
  if (o.what == 'p') return "the diag dir " + dir + " is no longer this user's private directory";
  return "";
}

}  // namespace

bool HangDiagDir::bounded(double timeout_s, std::size_t max_bytes, const std::function<void(int out)>& work,
                          std::string& got) {
  if (!silent_.empty()) return false;
  ChildAnswer a = run_in_child_until(timeout_s, max_bytes, work);
  if (!a.finished) {
    silent_ = a.error.rfind("no answer", 0) == 0
                  ? "the diag dir " + dir_ + " gave " + a.error + " (a hung NFS mount or a frozen filesystem?)"
                  : "the diag dir " + dir_ + " was not tried: " + a.error;
    return false;
  }
  got = std::move(a.bytes);
  return true;
}

bool HangDiagDir::claim_declared(const std::string& host) {
  if (dir_.empty()) return true;
  const std::string text = host + "\n";
  const std::vector<std::string> name = {kDeclaredName};
  const char* dir = dir_.c_str();
  const uid_t uid = ::getuid();
  std::string got;
  if (!bounded(timeout_s_, sizeof(Outcome), [&](int out) {
        Outcome o;
        const int dfd = open_diag_dir(dir, uid, o);
        if (dfd < 0) return answer(out, o);
        const NewWrite w = write_new_file(dfd, name, text);
        ::close(dfd);
        o.what = w.step == NewWrite::create && w.err == EEXIST ? 't' : 'k';
        answer(out, o);
      }, got))
    return true;
  return outcome_of(got).what != 't';
}

std::string HangDiagDir::declared_by() {
  if (dir_.empty()) return "";
  const char* dir = dir_.c_str();
  const uid_t uid = ::getuid();
  std::string got;
  if (!bounded(timeout_s_, sizeof(Outcome) + 256, [&](int out) {
        Outcome o;
        const int dfd = open_diag_dir(dir, uid, o);
        if (dfd < 0) return answer(out, o);
        const OpenedFile f = open_regular_file(dfd, kDeclaredName);
        ::close(dfd);
        char buf[256];
        const long n = f.fd >= 0 ? read_up_to(f.fd, buf, sizeof buf - 1) : -1;
        if (f.fd >= 0) ::close(f.fd);
        o.what = n > 0 ? 'k' : 'o';
        answer(out, o);
        if (n > 0) write_whole(out, buf, static_cast<std::size_t>(n));
      }, got))
    return "";
  std::string host;
  if (outcome_of(got, &host).what != 'k') return "";
  return escape_control(host.substr(0, host.find('\n')));
}

bool HangDiagDir::ask_torch(const std::vector<int>& ranks) {
  if (dir_.empty() || ranks.empty()) return false;
  // torch makes them as this user; anything else at those names is not asked.
  std::vector<std::string> pipes;
  for (int rank : ranks) pipes.push_back("fr_pipe.rank" + std::to_string(rank) + ".pipe");
  const char* dir = dir_.c_str();
  const uid_t uid = ::getuid();
  std::string got;
  if (!bounded(timeout_s_, sizeof(Outcome), [&](int out) {
        Outcome o;
        const int dfd = open_diag_dir(dir, uid, o);
        if (dfd < 0) return answer(out, o);
        o.what = 'k';
        for (const auto& p : pipes) {
          const int fd = open_owned_fifo(dfd, p.c_str(), uid);
          if (fd < 0) continue;
          if (::write(fd, "1\n", 2) == 2) o.err = 1;
          ::close(fd);
        }
        ::close(dfd);
        answer(out, o);
      }, got))
    return false;
  const Outcome o = outcome_of(got);
  return o.what == 'k' && o.err == 1;
}

std::string HangDiagDir::write_report(const std::string& host, const std::string& text, std::string& why) {
  if (dir_.empty()) {
    why = "this step has no diag dir (see the message at its start)";
    return "";
  }
  std::vector<std::string> names = {"hang." + host + ".txt"};
  for (auto& spare : random_names("hang." + host + ".", ".txt", kSpareReportNames)) names.push_back(std::move(spare));
  const char* dir = dir_.c_str();
  const uid_t uid = ::getuid();
  std::string got;
  if (!bounded(timeout_s_, sizeof(Outcome), [&](int out) {
        Outcome o;
        const int dfd = open_diag_dir(dir, uid, o);
        if (dfd < 0) return answer(out, o);
        const NewWrite w = write_new_file(dfd, names, text);
        ::close(dfd);
        o.name = static_cast<int>(w.name);
        o.err = w.err;
        o.what = w.step == NewWrite::done ? 'k' : w.step == NewWrite::create ? 'c' : 'w';
        answer(out, o);
      }, got)) {
    why = silent_;
    return "";
  }
  const Outcome o = outcome_of(got);
  if (std::string p = dir_problem(dir_, o); !p.empty()) {
    why = p;
    return "";
  }
  const std::string path =
      dir_ + "/" + names[o.name >= 0 && o.name < static_cast<int>(names.size()) ? static_cast<std::size_t>(o.name) : 0];
  if (o.what == 'c') why = "cannot create " + path + ": " + std::strerror(o.err);
  else if (o.what == 'w') why = "cannot write " + path + ": " + std::strerror(o.err);
  else if (o.what != 'k') why = "no answer from the child that writes " + path;
  return o.what == 'k' ? path : "";
}

bool HangDiagDir::names(std::vector<std::string>& out) {
  out.clear();
  if (dir_.empty()) return false;
  const char* dir = dir_.c_str();
  const uid_t uid = ::getuid();
  std::string got;
  if (!bounded(timeout_s_, 4u << 20, [&](int out_fd) {
        Outcome o;
        const int dfd = open_diag_dir(dir, uid, o);
        if (dfd < 0) return answer(out_fd, o);
        o.what = 'k';
        answer(out_fd, o);
        // getdents64, not readdir: opendir allocates, which a forked child must not.
        alignas(8) char buf[16384];
        for (;;) {
          const long n = ::syscall(SYS_getdents64, dfd, buf, sizeof buf);
          if (n <= 0) break;
          for (long at = 0; at < n;) {
            const char* rec = buf + at;
            unsigned short reclen;
            std::memcpy(&reclen, rec + 16, sizeof reclen);
            const char* name = rec + 19;
            write_whole(out_fd, name, std::strlen(name) + 1);
            at += reclen;
          }
        }
        ::close(dfd);
      }, got))
    return false;
  std::string rest;
  if (outcome_of(got, &rest).what != 'k') return false;
  for (std::size_t at = 0; at < rest.size();) {
    const std::size_t end = rest.find('\0', at);
    if (end == std::string::npos) break;
    out.push_back(rest.substr(at, end - at));
    at = end + 1;
  }
  return true;
}

}  // namespace gpudiag
