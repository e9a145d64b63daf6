#include "spank/slurm/step_killer.h"

#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>

namespace gpudiag {

namespace {
constexpr std::uint32_t kRefused = 1;
constexpr std::uint32_t kOneRunning = 2;
}  // namespace

bool StepKiller::prepare(EndStepFn end, double grace_s) {
  end_ = end;
  grace_s_ = grace_s > 0 ? grace_s : 0;
  ended_ = false;
  counted_ = -1;
  if (!shared_) {
    void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    shared_ = static_cast<Shared*>(p);
  }
  // A second step in one stepd does not exist, but stay correct (the page is fresh zeros).
  __atomic_store_n(&shared_->word, 0u, __ATOMIC_SEQ_CST);
  for (auto& h : shared_->said) __atomic_store_n(&h, std::uint64_t{0}, __ATOMIC_SEQ_CST);
  __atomic_store_n(&shared_->saying, 0u, __ATOMIC_SEQ_CST);
  claimed_ = 0;
  // The key stays in slurmstepd and its forks; the program's exec drops it.
  if (::getrandom(&key_, sizeof key_, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof key_))
    key_ = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           (static_cast<std::uint64_t>(::getpid()) << 32);
  for (auto& c : shared_->counted) __atomic_store_n(&c, std::uint8_t{0}, __ATOMIC_RELAXED);
  return true;
}

void StepKiller::mark_refused() {
  if (shared_) __atomic_fetch_or(&shared_->word, kRefused, __ATOMIC_SEQ_CST);
}

bool StepKiller::mark_running(int local_id) {
  if (!shared_ || counted_ >= 0) return true;
  std::uint32_t word = __atomic_load_n(&shared_->word, __ATOMIC_SEQ_CST);
  do {
    if (word & kRefused) return false;
  } while (!__atomic_compare_exchange_n(&shared_->word, &word, word + kOneRunning, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST));
  counted_ = local_id < 0 ? static_cast<int>(sizeof shared_->counted) : local_id;
  if (static_cast<std::size_t>(counted_) < sizeof shared_->counted)
    __atomic_store_n(&shared_->counted[counted_], std::uint8_t{1}, __ATOMIC_SEQ_CST);
  return true;
}

void StepKiller::unmark_running() {
  if (!shared_ || counted_ < 0) return;
  if (static_cast<std::size_t>(counted_) < sizeof shared_->counted)
    __atomic_store_n(&shared_->counted[counted_], std::uint8_t{0}, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&shared_->word, kOneRunning, __ATOMIC_SEQ_CST);
  counted_ = -1;
}

// The task has exited, so it changes its slot no more: only this process touches it now.
void StepKiller::task_reaped(int local_id) {
  if (!shared_ || local_id < 0 || static_cast<std::size_t>(local_id) >= sizeof shared_->counted) return;
  if (__atomic_exchange_n(&shared_->counted[local_id], std::uint8_t{0}, __ATOMIC_SEQ_CST))
    __atomic_fetch_sub(&shared_->word, kOneRunning, __ATOMIC_SEQ_CST);
}

namespace {
// FNV-1a over 64 bits from a secret offset, then mixed (splitmix64's finalizer); never 0
// (a free slot). Without the key no text can be chosen to collide with another.
std::uint64_t line_hash(std::string_view line, std::uint64_t key) {
  std::uint64_t h = 14695981039346656037ull ^ key;
  for (unsigned char c : line) h = (h ^ c) * 1099511628211ull;
  h ^= key;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h ? h : 1;
}
}  // namespace

bool StepKiller::first_to_say(std::string_view line, int local_id) {
  if (!shared_) return local_id == 0;
  const std::uint64_t h = line_hash(line, key_);
  for (auto& slot : shared_->said) {
    std::uint64_t seen = 0;
    if (__atomic_compare_exchange_n(&slot, &seen, h, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
      __atomic_fetch_add(&shared_->saying, 1u, __ATOMIC_SEQ_CST);
      ++claimed_;
      return true;
    }
    if (seen == h) return false;  // another task of the node said it
  }
  return local_id == 0;  // the page is full: task 0 says the rest, as without the page
}

void StepKiller::done_saying() {
  if (!shared_ || claimed_ <= 0) return;
  --claimed_;
  __atomic_fetch_sub(&shared_->saying, 1u, __ATOMIC_SEQ_CST);
}

bool waits_for_other_nodes(bool passed_own_checks, bool fabric_test) { return passed_own_checks || fabric_test; }

std::string StepKiller::fallback_hint() const {
  if (end_ && shared_) return "";
  return " (gpudiag cannot end the step on the other nodes with this Slurm: their tasks go on until the step "
         "ends; srun --kill-on-bad-exit ends it at once)";
}

bool end_step_now(bool refused, bool a_task_runs, StepKiller::Moment when) {
  if (!refused) return false;
  return when == StepKiller::Moment::kNodeDone || a_task_runs;
}

std::optional<std::string> StepKiller::end_if_refused(std::uint32_t job, std::uint32_t step,
                                                      const std::string& node, Moment when) {
  if (!shared_ || !end_ || ended_) return std::nullopt;
  const std::uint32_t word = __atomic_load_n(&shared_->word, __ATOMIC_SEQ_CST);
  if (!end_step_now((word & kRefused) != 0, word >= kOneRunning, when)) return std::nullopt;
  ended_ = true;  // once per node, whatever the answer: a refused RPC is not retried per task
  // A line another task claimed may still be on its way (bounded: that task may have died).
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(kSayingWait_s);
       __atomic_load_n(&shared_->saying, __ATOMIC_SEQ_CST) > 0 && std::chrono::steady_clock::now() < until;) {
    timespec t{0, 10 * 1000 * 1000};
    ::nanosleep(&t, nullptr);
  }
  if (grace_s_ > 0) {
    timespec t{static_cast<time_t>(grace_s_), static_cast<long>((grace_s_ - static_cast<double>(static_cast<time_t>(grace_s_))) * 1e9)};
    while (::nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
  }
  std::string why = end_(job, step);
  if (why.empty()) return std::nullopt;
  return end_step_failed_message(job, step, node, why);
}

std::string end_step_failed_message(std::uint32_t job, std::uint32_t step, const std::string& node,
                                    const std::string& why) {
  return "gpudiag: a task of step " + std::to_string(job) + "." + std::to_string(step) + " was refused on " + node +
         ", but slurmctld did not end the step on the other nodes (" + why +
         "): they go on until the step ends; srun --kill-on-bad-exit ends it at once";
}

}  // namespace gpudiag
