#define BOOST_TEST_MODULE parallel
// xgrad's thread pool: every index runs exactly once, nested and concurrent calls work,
// a body's exception reaches the caller, and the thread count is checked.
#include "helpers.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "xgrad/autograd/blas.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/nn/nn.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

// Restores the thread count a test changed.
struct ThreadCount {
  int saved = num_threads();
  ~ThreadCount() { set_num_threads(saved); }
};

constexpr double kBig = 1e9;  // work per index that always reaches the pool

}  // namespace

BOOST_AUTO_TEST_CASE(every_index_runs_once_for_any_thread_count) {
  ThreadCount restore;
  for (const int threads : {1, 2, 3, 5}) {
    set_num_threads(threads);
    BOOST_TEST(num_threads() == threads);
    for (const std::size_t n : {0, 1, 2, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      for (int round = 0; round < 20; ++round) parallel_for(n, kBig, [&](std::size_t i) { ++hits[i]; });
      for (std::size_t i = 0; i < n; ++i) BOOST_TEST(hits[i].load() == 20, "index " << i << " of " << n);
    }
  }
}

// Each thread starts at its home range, its share of the indices in order (the caller the
// first), so a row-parallel op finds on each core the rows the op before wrote there. Each
// thread's first body waits until every thread has begun one, so none can finish its range
// and take from another's first.
BOOST_AUTO_TEST_CASE(each_thread_starts_at_its_home_range) {
  ThreadCount restore;
  for (const int threads : {2, 3}) {
    set_num_threads(threads);
    constexpr std::size_t n = 12;
    const auto caller = std::this_thread::get_id();
    std::atomic<int> started{0};
    std::mutex mutex;
    std::map<std::thread::id, std::size_t> first;  // each thread's first index
    parallel_for(n, kBig, [&](std::size_t i) {
      {
        std::lock_guard lock(mutex);
        if (first.count(std::this_thread::get_id())) return;
        first[std::this_thread::get_id()] = i;
      }
      ++started;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (started.load() < threads && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    });
    if (started.load() < threads) {  // a worker never joined (the machine is crowded): nothing to check
      BOOST_TEST_MESSAGE(threads << " threads: only " << started.load() << " took part");
      continue;
    }
    std::set<std::size_t> firsts;
    for (const auto& [id, index] : first) firsts.insert(index);
    BOOST_TEST(first.at(caller) == 0u, threads << " threads");
    std::set<std::size_t> homes;
    for (int slot = 0; slot < threads; ++slot) homes.insert(n * static_cast<std::size_t>(slot) / threads);
    BOOST_TEST(firsts == homes, threads << " threads");
  }
}

BOOST_AUTO_TEST_CASE(small_jobs_stay_on_the_calling_thread) {
  ThreadCount restore;
  set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  bool elsewhere = false;
  parallel_for(8, 1.0, [&](std::size_t) { elsewhere |= std::this_thread::get_id() != caller; });
  BOOST_TEST(!elsewhere);
}

BOOST_AUTO_TEST_CASE(nested_loops_run_inside) {
  ThreadCount restore;
  set_num_threads(2);
  std::vector<std::atomic<int>> hits(16 * 16);
  parallel_for(16, kBig, [&](std::size_t i) { parallel_for(16, kBig, [&](std::size_t j) { ++hits[i * 16 + j]; }); });
  for (auto& h : hits) BOOST_TEST(h.load() == 1);
}

BOOST_AUTO_TEST_CASE(two_calling_threads_share_the_pool) {
  ThreadCount restore;
  set_num_threads(2);
  std::vector<std::atomic<long>> sums(2);
  const auto caller = [&](std::size_t which) {
    for (int round = 0; round < 200; ++round)
      parallel_for(100, kBig, [&](std::size_t i) { sums[which] += static_cast<long>(i); });
  };
  std::thread other(caller, 1);
  caller(0);
  other.join();
  BOOST_TEST(sums[0].load() == 200L * 4950);
  BOOST_TEST(sums[1].load() == 200L * 4950);
}

BOOST_AUTO_TEST_CASE(a_body_exception_reaches_the_caller) {
  ThreadCount restore;
  set_num_threads(2);
  std::atomic<int> ran{0};
  BOOST_CHECK_THROW(parallel_for(50, kBig,
                                 [&](std::size_t i) {
                                   ++ran;
                                   if (i == 17) throw std::runtime_error("body 17");
                                 }),
                    std::runtime_error);
  BOOST_TEST(ran.load() == 50);  // the other bodies still ran; the pool is usable after
  std::atomic<int> after{0};
  parallel_for(10, kBig, [&](std::size_t) { ++after; });
  BOOST_TEST(after.load() == 10);
}

// The same rule when the pool runs a job on its caller alone: on one thread, nested in a
// body, or while another process crowds the cores (the path the test above takes when the
// machine is busy).
BOOST_AUTO_TEST_CASE(a_body_exception_reaches_the_caller_when_run_serially) {
  ThreadCount restore;
  // A job whose bodies 17 and 30 throw: how many bodies ran, and whether it threw (no
  // Boost.Test check inside: it may run on a worker).
  const auto throwing_job = [] {
    std::atomic<int> ran{0};
    bool threw = false;
    try {
      parallel_for(50, kBig, [&](std::size_t i) {
        ++ran;
        if (i == 17 || i == 30) throw std::runtime_error(str("body ", i));
      });
    } catch (const std::runtime_error&) {
      threw = true;
    }
    return std::pair{ran.load(), threw};
  };
  set_num_threads(1);
  BOOST_TEST((throwing_job() == std::pair{50, true}));
  set_num_threads(2);
  std::atomic<int> ran{0}, threw{0};
  parallel_for(2, kBig, [&](std::size_t) {
    const auto [bodies, thrown] = throwing_job();  // nested: serially, on whichever thread
    ran += bodies, threw += thrown;
  });
  BOOST_TEST(ran.load() == 100);
  BOOST_TEST(threw.load() == 2);
}

BOOST_AUTO_TEST_CASE(thread_counts_are_checked) {
  ThreadCount restore;
  check_error([] { set_num_threads(0); }, {"set_num_threads", "0"});
  check_error([] { set_num_threads(-3); }, {"set_num_threads", "-3"});
  set_num_threads(2);
  BOOST_CHECK_THROW(parallel_for(4, kBig, [](std::size_t) { set_num_threads(1); }), Error);
  BOOST_TEST(num_threads() == 2);
}

// A child of fork() has none of the parent's workers: its pool starts new ones, and
// resizing it neither hangs nor crashes.
BOOST_AUTO_TEST_CASE(a_forked_child_gets_a_working_pool) {
  ThreadCount restore;
  set_num_threads(2);
  std::atomic<long> before{0};
  parallel_for(100, kBig, [&](std::size_t i) { before += static_cast<long>(i); });  // workers running
  const pid_t child = fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    alarm(30);  // a hang fails the test instead of stalling it
    bool ok = num_threads() == 2;
    for (const int threads : {2, 3, 1, 2}) {
      set_num_threads(threads);
      std::atomic<long> sum{0};
      parallel_for(1000, kBig, [&](std::size_t i) { sum += static_cast<long>(i); });
      ok = ok && sum.load() == 499500 && num_threads() == threads;
    }
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  BOOST_REQUIRE(waitpid(child, &status, 0) == child);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
  BOOST_TEST(before.load() == 4950);
}

BOOST_AUTO_TEST_CASE(a_training_step_gives_the_same_bits_on_any_thread_count) {
  // Products cut along k (weight gradients over 1024 positions), by rows and by columns,
  // LayerNorm's chunked reductions, attention, GELU and the loss: every gradient and the
  // loss are bitwise the same on 1, 2, 3, 5 and 8 threads, under whichever BLAS kernels run
  // (ctest runs this under each family the CPU supports: tests/with_blas_kernels.sh).
  // What lets data parallelism over processes with fewer threads each equal one process.
  BOOST_TEST_MESSAGE("BLAS: " << blas_summary());
  if (const char* expected = std::getenv("XGRAD_EXPECTED_BLAS_CORE"))
    BOOST_TEST_REQUIRE(blas_core() == expected, blas_summary());
  const ThreadCount restore;
  const auto step = [](int threads) {
    set_num_threads(threads);
    manual_seed(7);
    nn::LayerNorm norm(128);
    nn::MultiHeadAttention attention(128, 4);
    nn::Linear up(128, 512), down(512, 128), head(128, 40);
    Generator gen(3);
    const Tensor x = Tensor::randn({16, 64, 128}, gen).requires_grad_();
    std::vector<std::int64_t> targets(16 * 64);
    for (auto& t : targets) t = static_cast<std::int64_t>(gen.below(40));
    const Tensor h = x + attention.forward(norm.forward(x), norm.forward(x), norm.forward(x));
    const Tensor loss = cross_entropy(head.forward(h + down.forward(gelu(up.forward(h)))), Indices(targets, {16, 64}));
    loss.backward();
    std::vector<std::vector<double>> results{{loss.item()}, x.grad().to_vector()};
    for (const nn::Module* m : std::initializer_list<const nn::Module*>{&norm, &attention, &up, &down, &head})
      for (const auto& [name, p] : m->named_parameters()) results.push_back(p.grad().to_vector());
    return results;
  };
  const auto one = step(1);
  for (const int threads : {2, 3, 5, 8}) BOOST_CHECK_MESSAGE(step(threads) == one, threads << " threads");
}
