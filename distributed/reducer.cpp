#include "xgrad/distributed/reducer.hpp"

#include <cstring>

namespace xgrad::distributed {

GradientReducer::GradientReducer(const Communicator& communicator, const nn::Module& model, std::size_t micro_batches,
                                 ReducerOptions options)
    : communicator_(communicator), micro_batches_(micro_batches) {
  XGRAD_CHECK(micro_batches >= 1, "GradientReducer", "needs at least one micro-batch, got ", micro_batches);
  XGRAD_CHECK(options.bucket_bytes > 0, "GradientReducer", "bucket_bytes must be positive");
  for (const auto& [name, parameter] : model.named_parameters()) parameters_.push_back(parameter);
  XGRAD_CHECK(!parameters_.empty(), "GradientReducer", "the model has no parameters");
  // Buckets over the parameters in reverse registration order, each of one dtype.
  places_.resize(parameters_.size());
  for (std::size_t i = parameters_.size(); i-- > 0;) {
    const Tensor& p = parameters_[i];
    const std::size_t element_bytes = p.dtype() == DType::float32 ? 4 : 8;
    const bool fits = !buckets_.empty() && buckets_.back().dtype == p.dtype() &&
                      (buckets_.back().elements + p.numel()) * element_bytes <= options.bucket_bytes;
    if (!fits) buckets_.push_back(Bucket{p.dtype(), 0, element_bytes, {}, {}, {}, 0});
    Bucket& bucket = buckets_.back();
    places_[i] = {buckets_.size() - 1, bucket.elements};
    bucket.parameters.push_back(i);
    bucket.elements += p.numel();
  }
  for (Bucket& bucket : buckets_) {
    bucket.micro.resize(micro_batches_ * bucket.elements * bucket.element_bytes);
    bucket.sum.resize(bucket.elements * bucket.element_bytes);
  }
  finished_.assign(parameters_.size(), 0);
  is_queued_.assign(buckets_.size(), 0);
  for (std::size_t i = 0; i < parameters_.size(); ++i)
    hooks_.push_back(parameters_[i].add_grad_ready_hook([this, i](const Tensor& leaf) { on_ready(i, leaf); }));
  if (communicator_.size() > 1) thread_ = std::thread([this] { communicate(); });
}

GradientReducer::~GradientReducer() {
  if (thread_.joinable()) {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  for (std::size_t i = 0; i < parameters_.size(); ++i) parameters_[i].remove_grad_ready_hook(hooks_[i]);
}

std::vector<std::vector<std::size_t>> GradientReducer::bucket_parameters() const {
  std::vector<std::vector<std::size_t>> all;
  for (const Bucket& bucket : buckets_) all.push_back(bucket.parameters);
  return all;
}

void GradientReducer::begin_micro_batch() {
  XGRAD_CHECK(current_ + 1 < static_cast<std::ptrdiff_t>(micro_batches_), "GradientReducer::begin_micro_batch",
              "a step has ", micro_batches_, " micro-batches; call finish() after the last");
  if (current_ >= 0) close_micro_batch();
  ++current_;
  std::fill(finished_.begin(), finished_.end(), 0);
  for (Bucket& bucket : buckets_) bucket.ready = 0;
}

void GradientReducer::on_ready(std::size_t parameter, const Tensor& leaf) {
  if (current_ < 0 || finished_[parameter]) return;  // a backward outside a step, or a second one
  finished_[parameter] = 1;
  const Place place = places_[parameter];
  Bucket& bucket = buckets_[place.bucket];
  const Tensor grad = leaf.grad();
  XGRAD_CHECK(grad.dtype() == bucket.dtype, "GradientReducer", "a gradient of dtype ", grad.dtype(),
              " for a parameter of ", bucket.dtype, " (convert the model before making the reducer)");
  unsigned char* slot = bucket.micro.data() +
                        (static_cast<std::size_t>(current_) * bucket.elements + place.offset) * bucket.element_bytes;
  dispatch(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::memcpy(slot, grad.template data<T>(), grad.numel() * sizeof(T));
  });
  ++bucket.ready;
  if (current_ + 1 == static_cast<std::ptrdiff_t>(micro_batches_) && bucket.ready == bucket.parameters.size())
    queue(place.bucket);
}

void GradientReducer::close_micro_batch() {
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (finished_[i]) continue;
    finished_[i] = 1;
    const Place place = places_[i];
    Bucket& bucket = buckets_[place.bucket];
    std::memset(bucket.micro.data() +
                    (static_cast<std::size_t>(current_) * bucket.elements + place.offset) * bucket.element_bytes,
                0, parameters_[i].numel() * bucket.element_bytes);
    ++bucket.ready;
    if (current_ + 1 == static_cast<std::ptrdiff_t>(micro_batches_) && bucket.ready == bucket.parameters.size())
      queue(place.bucket);
  }
}

void GradientReducer::queue(std::size_t bucket) {
  if (!thread_.joinable()) return;  // one process: finish() reduces
  {
    const std::lock_guard lock(mutex_);
    is_queued_[bucket] = 1;
  }
  changed_.notify_all();
}

void GradientReducer::finish() {
  XGRAD_CHECK(current_ + 1 == static_cast<std::ptrdiff_t>(micro_batches_), "GradientReducer::finish", "after ",
              current_ + 1, " of ", micro_batches_, " micro-batches");
  close_micro_batch();
  if (thread_.joinable()) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return reduced_ == buckets_.size() || failed_; });
    if (failed_) std::rethrow_exception(failed_);
    std::fill(is_queued_.begin(), is_queued_.end(), 0);
    reduced_ = 0;
  } else {
    for (std::size_t b = 0; b < buckets_.size(); ++b) reduce(buckets_[b], static_cast<int>(b));
  }
  // The averages become the gradients.
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i];
    if (!p.grad().defined()) p.set_grad(Tensor::zeros(p.shape(), p.dtype()));
    const Bucket& bucket = buckets_[places_[i].bucket];
    dispatch(p.dtype(), [&](auto tag) {
      using T = decltype(tag);
      std::memcpy(p.grad().template data<T>(), bucket.sum.data() + places_[i].offset * sizeof(T),
                  p.numel() * sizeof(T));
    });
  }
  current_ = -1;
}

// s = (what rank - 1 passed on, or nothing) + each local micro-batch in turn; the last
// rank divides by every micro-batch of the job and broadcasts.
void GradientReducer::reduce(Bucket& bucket, int tag) {
  const int rank = communicator_.rank(), ranks = communicator_.size();
  dispatch(bucket.dtype, [&](auto type) {
    using T = decltype(type);
    T* s = reinterpret_cast<T*>(bucket.sum.data());
    const T* micro = reinterpret_cast<const T*>(bucket.micro.data());
    const std::size_t n = bucket.elements;
    std::size_t first = 0;
    if (rank == 0) {
      std::memcpy(s, micro, n * sizeof(T));
      first = 1;
    } else {
      communicator_.receive(s, n * sizeof(T), rank - 1, tag);
    }
    for (std::size_t j = first; j < micro_batches_; ++j)
      for (std::size_t i = 0; i < n; ++i) s[i] = s[i] + micro[j * n + i];
    if (rank + 1 < ranks) {
      communicator_.send(s, n * sizeof(T), rank + 1, tag);
    } else {
      const T count = static_cast<T>(static_cast<std::size_t>(ranks) * micro_batches_);
      for (std::size_t i = 0; i < n; ++i) s[i] = s[i] / count;
    }
    communicator_.broadcast(s, n * sizeof(T), ranks - 1);
  });
}

void GradientReducer::communicate() {
  for (;;) {
    std::size_t next = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || (reduced_ < buckets_.size() && is_queued_[reduced_]); });
      if (stopping_) return;
      next = reduced_;
    }
    std::exception_ptr error;
    try {
      reduce(buckets_[next], static_cast<int>(next));
    } catch (...) {
      error = std::current_exception();
    }
    {
      const std::lock_guard lock(mutex_);
      if (error)
        failed_ = error;
      else
        ++reduced_;
    }
    changed_.notify_all();
    if (error) return;
  }
}

}  // namespace xgrad::distributed
