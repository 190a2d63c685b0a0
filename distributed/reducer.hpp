#pragma once
// Gradient averaging over ranks and micro-batches, the way DDP does it, but exact.
//
// Each step runs `micro_batches` micro-batches on every rank (gradient accumulation; 1
// for none). During the last micro-batch's backward, the parameters' gradients are packed
// into buckets (about bucket_bytes each, in reverse registration order: roughly the order
// in which backward finishes them), and each bucket is reduced as soon as all of its
// gradients are final (Tensor::add_grad_ready_hook), on a communication thread, while
// backward goes on. finish() waits for the last bucket and writes every parameter's
// average into its gradient.
//
// The reduction has one fixed order, so that the result never depends on timing and is
// bitwise the same as one process accumulating every micro-batch in turn: with g(r, j)
// the gradient of rank r's micro-batch j, the sum is taken
//   s = g(0, 0);  s += g(0, 1); ...; s += g(0, K-1);  s += g(1, 0); ... s += g(N-1, K-1)
// (rank r receives s from rank r-1, adds its own micro-batches, passes it on), then
// s / (N K) is broadcast from the last rank. One process with K micro-batches computes
// exactly that with N = 1; N ranks with K each equal one process with N K.
//
// A parameter that gets no gradient in a micro-batch (a layer the batch did not use)
// counts as zeros there; one with no gradient anywhere ends with a zero gradient.

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "xgrad/distributed/communicator.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::distributed {

struct ReducerOptions {
  std::size_t bucket_bytes = std::size_t{1} << 20;  // 1 MiB (docs/benchmarks.md, "Several processes")
};

class GradientReducer {
 public:
  GradientReducer(const Communicator& communicator, const nn::Module& model, std::size_t micro_batches = 1,
                  ReducerOptions options = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before each micro-batch's backward (after zero_grad): the first of a step, then the
  // next, micro_batches times in all.
  void begin_micro_batch();
  // After the last micro-batch's backward: every parameter's gradient becomes the
  // average over ranks and micro-batches (the same bits on every rank). Throws the
  // communicator's CommunicationError when a reduction failed (the gradients are then
  // not written; neither is anything after, the reducer is done).
  void finish();

  std::size_t micro_batches() const { return micro_batches_; }
  std::size_t num_buckets() const { return buckets_.size(); }
  // The parameters of each bucket, by index in the model's registration order.
  std::vector<std::vector<std::size_t>> bucket_parameters() const;

 private:
  struct Bucket {
    DType dtype;
    std::size_t elements = 0, element_bytes = 0;
    std::vector<std::size_t> parameters;  // in bucket order
    std::vector<unsigned char> micro;     // micro_batches copies of the bucket's gradients
    std::vector<unsigned char> sum;
    std::size_t ready = 0;  // parameters finished in the current micro-batch
  };
  struct Place {
    std::size_t bucket = 0, offset = 0;  // offset in elements
  };

  void on_ready(std::size_t parameter, const Tensor& leaf);
  void close_micro_batch();  // zeros for what got no gradient; queues complete buckets
  void queue(std::size_t bucket);
  void reduce(Bucket& bucket, int tag);
  void communicate();  // the communication thread

  const Communicator& communicator_;
  std::vector<Tensor> parameters_;
  std::vector<std::size_t> hooks_;
  std::vector<Place> places_;
  std::vector<Bucket> buckets_;
  std::size_t micro_batches_;
  std::ptrdiff_t current_ = -1;  // the micro-batch under way, -1 between steps
  std::vector<char> finished_;   // per parameter, in the current micro-batch

  // Between the backward thread and the communication thread.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t queued_ = 0, reduced_ = 0;  // buckets of this step, in bucket order
  std::vector<char> is_queued_;
  bool stopping_ = false;
  std::exception_ptr failed_;  // the communication thread's error; it has stopped
  std::thread thread_;
};

}  // namespace xgrad::distributed
