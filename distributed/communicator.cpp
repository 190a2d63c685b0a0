#include "xgrad/distributed/communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "xgrad/nn/module.hpp"

namespace xgrad::distributed {

namespace {

int as_count(std::size_t bytes, const char* op) {
  XGRAD_CHECK(bytes <= static_cast<std::size_t>(INT_MAX), op, bytes, " bytes in one message (at most ", INT_MAX, ")");
  return static_cast<int>(bytes);
}

int live_communicators = 0;           // MPI is finalised with the last
std::atomic<bool> mpi_broken{false};  // a communication timed out: MPI is left as it is

}  // namespace

bool launched_by_mpirun() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(variable)) return true;
  return false;
}

Communicator::Communicator() {
  if (!launched_by_mpirun()) return;
  uses_mpi_ = true;
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    // A rank waiting in MPI yields its core rather than spinning: the reducer's thread
    // waits while the rank's own compute (and, on a shared machine, other ranks) needs the
    // cores. The user's setting, when given, wins.
    ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      // Every rank gets the same level, so each ends here alike, MPI closed behind it.
      MPI_Finalize();
      fail("Communicator", "this MPI provides thread level ", provided,
           ", not MPI_THREAD_MULTIPLE (the reducer's thread needs it): use an Open MPI built with thread support");
    }
  }
  ++live_communicators;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  auto* node = new MPI_Comm;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, node);
  MPI_Comm_rank(*node, &local_rank_);
  MPI_Comm_size(*node, &local_size_);
  node_comm_ = node;
}

Communicator::~Communicator() {
  if (!uses_mpi_) return;
  --live_communicators;
  if (mpi_broken) return;  // MPI_Comm_free and MPI_Finalize would wait for the lost ranks
  auto* node = static_cast<MPI_Comm*>(node_comm_);
  MPI_Comm_free(node);
  delete node;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (live_communicators == 0 && !finalized) MPI_Finalize();
}

void Communicator::set_timeout(std::chrono::milliseconds timeout) {
  XGRAD_CHECK(timeout.count() >= 1, "Communicator::set_timeout", timeout.count(), " ms; need at least 1 ms");
  timeout_ = timeout;
}

bool Communicator::broken() { return mpi_broken; }

void Communicator::check_usable(const char* op) const {
  if (mpi_broken)
    throw CommunicationError(str(op, ": an earlier communication of this rank failed; the job cannot go on"));
}

// Polls rather than blocking in MPI_Wait, which has no deadline: at once for the first
// 100 polls (a message under way), then asleep between polls, 10 us at first, twice as
// long each time up to 500 us, so that a rank waiting through another's long stretch
// leaves its core to the rank's own threads (and other ranks) and adds at most half a
// millisecond to a long wait.
void Communicator::wait(void* request, const std::string& what) const {
  using Clock = std::chrono::steady_clock;
  const auto began = Clock::now();
  auto* pending = static_cast<MPI_Request*>(request);
  auto pause = std::chrono::microseconds(10);
  for (int polls = 0, done = 0;; ++polls) {
    MPI_Test(pending, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (Clock::now() - began > timeout_) {
      mpi_broken = true;
      throw CommunicationError(str(what, ": no answer within ", static_cast<double>(timeout_.count()) / 1000.0,
                                   " s: the network between the ranks is down, or a rank is stuck or gone"));
    }
    if (polls < 100) continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, std::chrono::microseconds(500));
  }
}

void Communicator::barrier() const {
  if (!uses_mpi_) return;
  check_usable("barrier");
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  wait(&request, "barrier");
}

void Communicator::broadcast(void* data, std::size_t bytes, int root) const {
  if (!uses_mpi_) return;
  check_usable("broadcast");
  MPI_Request request;
  MPI_Ibcast(data, as_count(bytes, "broadcast"), MPI_BYTE, root, MPI_COMM_WORLD, &request);
  wait(&request, str("broadcast from rank ", root));
}

std::vector<double> Communicator::all_gather(const std::vector<double>& values) const {
  if (!uses_mpi_) return values;
  check_usable("all_gather");
  std::vector<double> all(values.size() * static_cast<std::size_t>(size_));
  MPI_Request request;
  MPI_Iallgather(values.data(), as_count(values.size(), "all_gather"), MPI_DOUBLE, all.data(),
                 as_count(values.size(), "all_gather"), MPI_DOUBLE, MPI_COMM_WORLD, &request);
  wait(&request, "all_gather");
  return all;
}

bool Communicator::any(bool flag) const {
  if (!uses_mpi_) return flag;
  check_usable("any");
  int mine = flag ? 1 : 0, anyone = 0;
  MPI_Request request;
  MPI_Iallreduce(&mine, &anyone, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD, &request);
  wait(&request, "any");
  return anyone != 0;
}

void Communicator::abort(const std::string& message, int code) const {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  if (uses_mpi_ && !mpi_broken) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void Communicator::send(const void* data, std::size_t bytes, int to, int tag) const {
  XGRAD_CHECK(uses_mpi_, "send", "needs a job started by mpirun");
  check_usable("send");
  MPI_Request request;
  MPI_Isend(data, as_count(bytes, "send"), MPI_BYTE, to, tag, MPI_COMM_WORLD, &request);
  wait(&request, str("send to rank ", to));
}

void Communicator::receive(void* data, std::size_t bytes, int from, int tag) const {
  XGRAD_CHECK(uses_mpi_, "receive", "needs a job started by mpirun");
  check_usable("receive");
  MPI_Request request;
  MPI_Irecv(data, as_count(bytes, "receive"), MPI_BYTE, from, tag, MPI_COMM_WORLD, &request);
  wait(&request, str("receive from rank ", from));
}

void broadcast_state(const Communicator& communicator, nn::Module& module, int root) {
  if (communicator.size() == 1) return;
  for (auto& [name, tensor] : module.state_dict())
    dispatch(tensor.dtype(), [&](auto tag) {
      using T = decltype(tag);
      communicator.broadcast(tensor.template data<T>(), tensor.numel() * sizeof(T), root);
    });
}

void print_on_root(const Communicator& communicator, const std::string& line) {
  if (!communicator.is_root()) return;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void save_on_root(const Communicator& communicator, const std::string& path, const Stateful& model,
                  const Stateful* optimizer, const nn::Metadata& metadata) {
  if (communicator.is_root()) nn::save(path, model, optimizer, metadata);
}

}  // namespace xgrad::distributed
