#pragma once
// xgrad::distributed: data-parallel training over processes, on Open MPI. A separate
// library (target xgrad::distributed): the core library never depends on MPI.
//
// A Communicator is the job's processes. Started by mpirun, it initialises MPI once
// (asking for MPI_THREAD_MULTIPLE: the gradient reducer communicates from a thread of its
// own) and finalises it when the last Communicator ends; started any other way it is a
// world of one process that never touches MPI, so a program built with this library runs
// the same alone.
//
// Every communication waits for the other ranks at most timeout() (20 s unless set): a
// rank whose network link is cut, or whose peer has died without its process manager
// noticing, would otherwise wait forever (TCP retries for a quarter of an hour). Past it
// the call throws a CommunicationError and MPI is broken() for the whole process: every
// later call throws at once, and MPI is left unfinalised (MPI_Finalize would wait for the
// lost ranks). The failed call's request stays pending on its buffers; Open MPI's TCP and
// shared-memory transports move data only inside MPI calls, which the process no longer
// makes (with a transport that moves data by itself, RDMA, keep those buffers alive).
// What to do then (save, say why, exit) is the program's choice.

#include <chrono>
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

// A communication that did not complete within the communicator's timeout.
class CommunicationError : public Error {
 public:
  using Error::Error;
};

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

  // At least 1 ms. Longer than the longest stretch one rank spends alone between two
  // communications (rank 0 writing a checkpoint or printing samples). Set it before
  // another thread uses the communicator.
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }
  // After a CommunicationError (of any communicator of the process): every later
  // communication throws one at once.
  static bool broken();

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
  // Waits for a started MPI request (an MPI_Request*) for at most timeout_; `what` names
  // the call in the error.
  void wait(void* request, const std::string& what) const;
  void check_usable(const char* op) const;

  bool uses_mpi_ = false;
  std::chrono::milliseconds timeout_{20'000};
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
