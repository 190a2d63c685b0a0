#pragma once
// xgrad's one thread pool, used by its kernels, its matrix products (OpenBLAS runs one
// thread per call; xgrad splits large products over the pool) and its optimizers.
//
// parallel_for(n, work, body) runs body(i) for i in [0, n) on the pool when there is
// enough of it (`work` is a rough operation count per index); small jobs stay on the
// calling thread, where waking the pool would cost more than it saves. Each index runs on
// exactly one thread, so results do not depend on scheduling as long as body(i) writes
// only its own outputs. A parallel_for inside a body, or from a second thread while the
// pool is busy, runs serially on its caller. A child of fork() starts its own workers.
//
// Idle workers spin for a few microseconds, then sleep in the kernel (futex): they never
// hold a core that another thread or process needs, the stall libgomp's default
// spin-wait causes on virtual machines and beside other processes.

#include <cstddef>
#include <exception>
#include <type_traits>

namespace xgrad {

// Threads used by the pool, the calling thread included. Default: the CPUs this process
// may run on, or OMP_NUM_THREADS when that is set. Results are deterministic for a given
// count.
void set_num_threads(int threads);  // 1 .. max_threads()
int num_threads();
// 4 per CPU this process may use, at least 8: more threads only wait, and each thread
// calling OpenBLAS holds buffers of its own (hundreds of threads exhaust its allocator).
int max_threads();

namespace detail {
using IndexFunction = void (*)(void* context, std::size_t index);
// Runs function(context, i) for every i in [0, n) on the pool (the caller takes part).
void run_on_pool(std::size_t n, IndexFunction function, void* context);

// Runs body(i) for every i in [0, n) on the calling thread, with the pool's rule for
// errors.
template <class Body>
void run_here(std::size_t n, Body& body) {
  std::exception_ptr error;
  for (std::size_t i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}
}  // namespace detail

// The least work (n x work) that parallel_for shares: a pointwise pass over 12K elements,
// some microseconds. A spinning worker joins a job within 0.2 us (the median on the AMX VM),
// so small jobs pay for themselves: from 1e6 to this, the lm step ran 1.07x and tiny's
// bf16 step 1.12x faster there, nothing slower.
inline constexpr double kMinParallelWork = 1e5;

// body(i) for every i in [0, n), on the pool when n x work is worth sharing. Every body
// runs, wherever it runs; then the first exception a body threw, if any, is rethrown.
template <class Body>
void parallel_for(std::size_t n, double work, Body&& body) {
  const bool worth_it = n > 1 && static_cast<double>(n) * work >= kMinParallelWork;
  if (!worth_it || num_threads() == 1) {
    detail::run_here(n, body);
    return;
  }
  using BodyType = std::remove_reference_t<Body>;
  detail::run_on_pool(
      n, [](void* context, std::size_t i) { (*static_cast<BodyType*>(context))(i); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

// The chunk xgrad's elementwise loops use with parallel_for_chunks (gradient sums, the
// optimizers' updates, pointwise ops): large enough to outweigh handing it to a thread.
inline constexpr std::size_t kElementsPerChunk = 1 << 14;

// body(begin, end) for consecutive chunks of `chunk` indices covering [0, n), chunks in
// parallel. The cut depends only on n and chunk, never on the thread count, so a result
// combined chunk by chunk in chunk order is the same on any number of threads.
template <class Body>
void parallel_for_chunks(std::size_t n, std::size_t chunk, double work_per_index, Body&& body) {
  parallel_for((n + chunk - 1) / chunk, work_per_index * static_cast<double>(chunk), [&](std::size_t k) {
    const std::size_t begin = k * chunk;
    body(begin, n - begin < chunk ? n : begin + chunk);
  });
}

}  // namespace xgrad
