#pragma once
// xgrad::distributed: data-parallel training over processes, on Open MPI. A separate
// library (target xgrad::distributed): the core library never depends on MPI.
//
// A Communicator is the job's processes. Started by mpirun, it initialises MPI once
// (asking for MPI_THREAD_MULTIPLE: the gradient reducer communicates from a thread of its
// own) and finalises it when the last Communicator ends; started any other way it is a
// world of one process that never touches MPI, so a program built with this library runs
// the same alone.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "xgrad/autograd/state.hpp"
#include "xgrad/nn/checkpoint.hpp"

namespace xgrad::nn {
class Module;
}

namespace xgrad::distributed {

class Communicator {
 public:
  Communicator();
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the processes of this machine
  int local_size() const { return local_size_; }
  bool is_root() const { return rank_ == 0; }
  bool uses_mpi() const { return uses_mpi_; }

  void barrier() const;
  // Every rank gets root's bytes.
  void broadcast(void* data, std::size_t bytes, int root) const;
  // Every rank's values, in rank order (each rank gives the same count).
  std::vector<double> all_gather(const std::vector<double>& values) const;
  // True on every rank when it is true on any (a decision all ranks must share, such as
  // stopping after a signal that reached one of them).
  bool any(bool flag) const;
  // Ends every process of the job with `message` on stderr (MPI_Abort); alone: exits.
  [[noreturn]] void abort(const std::string& message, int code = 2) const;

  // Point to point, for the gradient reducer's chain (tag: one per bucket).
  void send(const void* data, std::size_t bytes, int to, int tag) const;
  void receive(void* data, std::size_t bytes, int from, int tag) const;

 private:
  bool uses_mpi_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  void* node_comm_ = nullptr;  // MPI_Comm of this machine's ranks (when uses_mpi_)
};

// True when this process was started by mpirun (Open MPI's or a PMIx launcher).
bool launched_by_mpirun();

// Copies rank root's parameters and buffers into every rank's module (same names and
// shapes on every rank), so that every replica starts equal.
void broadcast_state(const Communicator& communicator, nn::Module& module, int root = 0);

// Rank 0 alone prints a line to stdout / writes a checkpoint (nn::save: atomically); the
// other ranks do nothing. Replicas are equal, so rank 0's state is the job's.
void print_on_root(const Communicator& communicator, const std::string& line);
void save_on_root(const Communicator& communicator, const std::string& path, const Stateful& model,
                  const Stateful* optimizer = nullptr, const nn::Metadata& metadata = {});

}  // namespace xgrad::distributed
