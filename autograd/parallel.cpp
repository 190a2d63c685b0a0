#include "xgrad/autograd/parallel.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "xgrad/autograd/detail/denormals.hpp"
#include "xgrad/autograd/detail/profile.hpp"
#include "xgrad/autograd/error.hpp"

namespace xgrad {

namespace {

// How long a waiting thread spins before it sleeps: long enough to bridge the serial
// glue between two parallel loops of one step (a futex wake-up costs tens of
// microseconds on a VM). Measured on the tiny config: 50 us 5.5 ms/step, 200 us 5.0.
// When another process needs the cores, Crowding below stops the spinning altogether.
constexpr auto kSpin = std::chrono::microseconds(200);

// The calling thread's time spent runnable but waiting for a core, in nanoseconds:
// /proc/thread-self/schedstat holds "ns on a core, ns waiting for one, time slices".
// -1 where the kernel does not keep it.
std::int64_t run_queue_wait_ns() {
  const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[96];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  unsigned long long on_core = 0, waiting = 0;
  return std::sscanf(text, "%llu %llu", &on_core, &waiting) == 2 ? static_cast<std::int64_t>(waiting) : -1;
}

// Whether the cores are shared with other busy threads, judged by the caller. Then the
// workers gain nothing: each thread gets a share of a core, and a worker spends most of
// its share spinning between jobs, time the other process needed. Two xgrad processes
// of 2 threads on 2 cores ran 1.4-1.7x slower each than two of 1 thread (tiny: 3.4 ms
// against 2.1 in bf16, 5.0-5.2 against 3.4 in float32); with this, 1.03-1.14x
// (bench/concurrency.sh). The sign: over two windows of at least kWindow in a row, the
// caller spent more than kCrowded of the time runnable but waiting for a core. Sharing
// the cores with another busy process makes that about half, window after window; a
// thread of the process's own that wakes now and then (the gradient reducer's), or the
// kernel's, a few percent, with a lone window above now and then (alone, medium's step
// had 1-7 windows of 500 above 0.2, the highest 0.44; two in a row, none). The pool
// then runs jobs on the caller alone (its workers sleep) for kFirst, twice as long while
// the sign recurs, up to kLongest, then tries the workers again. Which thread runs an
// index never changes a result.
class Crowding {
 public:
  using Clock = std::chrono::steady_clock;

  // Called by the pool's caller (with the pool taken) before each job; reads the kernel's
  // count once a window.
  bool crowded() {
    const auto now = Clock::now();
    if (now < until_) return true;
    if (window_start_ == Clock::time_point{}) {  // the first window, or the first after a span
      window_start_ = now, waited_at_start_ = run_queue_wait_ns();
      return false;
    }
    if (now - window_start_ < kWindow) return false;
    const std::int64_t waited = run_queue_wait_ns();
    const bool waiting = waited >= 0 && waited_at_start_ >= 0 &&
                         static_cast<double>(waited - waited_at_start_) >
                             kCrowded * static_cast<double>(std::chrono::nanoseconds(now - window_start_).count());
    const bool sign = waiting && waiting_before_;
    waiting_before_ = waiting, window_start_ = now, waited_at_start_ = waited;
    if (!sign) return false;
    // Again soon after the last span (its next windows): longer.
    const bool again = now < until_ + std::max<Clock::duration>(2 * span_, 4 * kWindow);
    span_ = again ? std::min<Clock::duration>(2 * span_, kLongest) : kFirst;
    until_ = now + span_;
    window_start_ = {}, waiting_before_ = false;
    return true;
  }

 private:
  static constexpr Clock::duration kWindow = std::chrono::milliseconds(5);
  static constexpr Clock::duration kFirst = std::chrono::milliseconds(8), kLongest = std::chrono::milliseconds(128);
  static constexpr double kCrowded = 0.2;

  Clock::time_point window_start_{}, until_{};
  std::int64_t waited_at_start_ = -1;
  bool waiting_before_ = false;  // the window before this one was over kCrowded too
  Clock::duration span_{};
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void futex_wait(const std::atomic<std::uint32_t>& word, std::uint32_t old) {
  syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
}

void futex_wake_all(const std::atomic<std::uint32_t>& word) {
  syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

// Spins until word != old (or kSpin passes), then sleeps on the futex until it changes;
// `sleepers` counts the threads asleep, so that a change wakes them only when there are any.
std::uint32_t wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t old, std::atomic<int>& sleepers) {
  const auto give_up = std::chrono::steady_clock::now() + kSpin;
  for (int spins = 0;; ++spins) {
    const std::uint32_t now = word.load(std::memory_order_acquire);
    if (now != old) return now;
    if ((spins & 63) == 63 && std::chrono::steady_clock::now() > give_up) break;
    cpu_relax();
  }
  for (;;) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t now = word.load(std::memory_order_seq_cst);
    if (now == old) futex_wait(word, old);  // returns at once if word changed meanwhile
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (now != old) return now;
    const std::uint32_t after = word.load(std::memory_order_acquire);
    if (after != old) return after;
  }
}

// Changes are made with seq_cst read-modify-writes before this check (see wait_while_equal).
void wake_sleepers(const std::atomic<std::uint32_t>& word, const std::atomic<int>& sleepers) {
  if (sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(word);
}

int usable_cpus() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) return std::max(1, CPU_COUNT(&cpus));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return std::min(n, max_threads());
  }
  return usable_cpus();
}

thread_local bool t_inside_job = false;
thread_local Crowding t_crowding;  // as the pool's caller sees it

// This thread runs a job's indices: a parallel_for inside runs serially, and
// set_num_threads is refused.
struct InsideJob {
  bool was = std::exchange(t_inside_job, true);
  ~InsideJob() { t_inside_job = was; }
};

// One job at a time. The caller publishes it by bumping `epoch_`; a worker joins by
// incrementing `inside_` unless the job is already closed, claims indices until none are
// left, and leaves. The caller works too, then closes the job and waits only for workers
// inside it: a worker that was descheduled and never joined is not waited for.
//
// Each thread has a home range, its share of [0, n) in order (the caller the first), and
// claims from it first, then from the others' ranges front to back. A row-parallel op
// then finds the rows the op before it wrote on the same core, in its L2: each of the two
// vCPUs here reads its L2 at about 100 GB/s and its share of L3 at 28, DRAM at 14, and
// indices claimed in turn from one counter had each core reading half the rows the other
// had just written. Which thread runs an index never changes a result (parallel.hpp).
class ThreadPool {
 public:
  explicit ThreadPool(int threads) : threads_(threads) { start(); }
  ~ThreadPool() { stop(); }

  int threads() const { return threads_; }

  // In the child of a fork(): the parent's workers do not exist here. Their std::thread
  // objects are abandoned (joining them would wait forever, destroying them would
  // terminate), the locks are made anew, and new workers start with the next job.
  void forget_workers_after_fork() {
    static auto* abandoned = new std::vector<std::vector<std::thread>>();  // never destroyed
    abandoned->push_back(std::move(workers_));
    workers_ = std::vector<std::thread>();
    new (&busy_) std::mutex;
    new (&error_mutex_) std::mutex;
    inside_.store(kClosed);
    epoch_sleepers_.store(0);
    caller_sleeping_.store(0);
    t_crowding = Crowding();
    t_inside_job = false;
  }

  void resize(int threads) {
    std::lock_guard lock(busy_);
    stop();
    threads_ = threads;
    start();
  }

  void run(std::size_t n, detail::IndexFunction function, void* context) {
    // On this thread alone, as a job (a body's own parallel_for runs serially too).
    const auto serially = [&] {
      const InsideJob inside;
      auto body = [&](std::size_t i) { function(context, i); };
      detail::run_here(n, body);
    };
    if (t_inside_job) return serially();  // nested
    std::unique_lock lock(busy_, std::try_to_lock);
    if (!lock.owns_lock()) return serially();  // another thread has the pool
    if (threads_ == 1 || t_crowding.crowded()) return serially();
    if (workers_.empty()) start();  // after a fork
    function_ = function;
    context_ = context;
    count_ = n;
    owner_ = profile::active() ? profile::innermost() : profile::EventRef{};
    float_mode_ = detail::float_mode();  // denormals flushed or kept, as the caller runs
    for (std::size_t slot = 0; slot < ranges_.size(); ++slot) {
      ranges_[slot].next.store(home_begin(slot), std::memory_order_relaxed);
      ranges_[slot].end = home_begin(slot + 1);
    }
    error_ = nullptr;
    inside_.store(0, std::memory_order_release);
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    wake_sleepers(epoch_, epoch_sleepers_);
    work(0);
    // Close the job, then wait for the workers still inside it.
    const profile::Scope waiting(profile::Kind::pool_wait, "pool wait");
    std::uint32_t state = inside_.fetch_or(kClosed, std::memory_order_seq_cst) | kClosed;
    while (state != kClosed) state = wait_while_equal(inside_, state, caller_sleeping_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static constexpr std::uint32_t kClosed = 1u << 31;

  void start() {
    stopping_ = false;
    ranges_ = std::vector<Range>(static_cast<std::size_t>(threads_));
    const std::uint32_t epoch = epoch_.load();  // a worker that starts late still sees every later change
    for (int i = 1; i < threads_; ++i)
      workers_.emplace_back([this, epoch, i] { worker_loop(epoch, static_cast<std::size_t>(i)); });
  }

  // Where thread `slot`'s home range of the current job begins (the next one's begins
  // where it ends).
  std::size_t home_begin(std::size_t slot) const { return count_ * slot / ranges_.size(); }

  void stop() {
    stopping_ = true;
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(epoch_);
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  void worker_loop(std::uint32_t seen, std::size_t slot) {
    for (;;) {
      seen = wait_while_equal(epoch_, seen, epoch_sleepers_);
      if (stopping_) return;
      std::uint32_t state = inside_.load(std::memory_order_acquire);
      bool joined = false;
      while (!(state & kClosed) && !(joined = inside_.compare_exchange_weak(state, state + 1))) {
      }
      if (!joined) continue;
      const detail::ModeOf callers_mode(float_mode_);
      work(slot);
      if (inside_.fetch_sub(1, std::memory_order_seq_cst) == (kClosed | 1)) wake_sleepers(inside_, caller_sleeping_);
    }
  }

  // This thread's share of the job, its home range first: one pool task event, owned by
  // the caller's event.
  void work(std::size_t slot) {
    const profile::Scope task(profile::Kind::pool_task, "pool task");
    if (profile::Event* event = task.event()) event->owner = owner_;
    const InsideJob inside;
    for (std::size_t k = 0; k < ranges_.size(); ++k) {
      Range& range = ranges_[(slot + k) % ranges_.size()];
      for (std::size_t i; (i = range.next.fetch_add(1, std::memory_order_relaxed)) < range.end;) {
        try {
          function_(context_, i);
        } catch (...) {
          std::lock_guard lock(error_mutex_);
          if (!error_) error_ = std::current_exception();
        }
      }
    }
  }

  // A thread's home range of the current job: indices [next, end) left to claim.
  struct alignas(64) Range {  // a cache line each: claims on one do not slow the others
    std::atomic<std::size_t> next{0};
    std::size_t end = 0;
  };

  int threads_;  // the caller included
  std::vector<std::thread> workers_;
  std::mutex busy_;  // held by the caller for the whole job
  std::atomic<std::uint32_t> epoch_{0};
  std::atomic<std::uint32_t> inside_{kClosed};
  std::atomic<int> epoch_sleepers_{0}, caller_sleeping_{0};
  std::vector<Range> ranges_;  // one per thread, the caller's first
  std::atomic<bool> stopping_{false};
  detail::IndexFunction function_ = nullptr;
  void* context_ = nullptr;
  std::size_t count_ = 0;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  profile::EventRef owner_;       // the caller's innermost event while a profiler records
  std::uint64_t float_mode_ = 0;  // the caller's floating-point control bits
};

ThreadPool& pool() {
  static ThreadPool instance(default_threads());
  static const bool fork_handled = pthread_atfork(nullptr, nullptr, [] { pool().forget_workers_after_fork(); }) == 0;
  (void)fork_handled;
  return instance;
}

}  // namespace

int max_threads() { return std::max(8, 4 * usable_cpus()); }

void set_num_threads(int threads) {
  XGRAD_CHECK(threads >= 1, "set_num_threads", threads, " threads; need at least 1");
  XGRAD_CHECK(threads <= max_threads(), "set_num_threads", threads, " threads; at most ", max_threads(), " (4 per CPU ",
              "this process may use: more only wait, and each thread calling OpenBLAS holds its own buffers)");
  XGRAD_CHECK(!t_inside_job, "set_num_threads", "called inside a parallel_for body");
  if (threads != pool().threads()) pool().resize(threads);
}

int num_threads() { return pool().threads(); }

void detail::run_on_pool(std::size_t n, IndexFunction function, void* context) { pool().run(n, function, context); }

}  // namespace xgrad
