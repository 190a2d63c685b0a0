#include "xgrad/distributed/communicator.hpp"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "xgrad/nn/module.hpp"

namespace xgrad::distributed {

namespace {

int as_count(std::size_t bytes, const char* op) {
  XGRAD_CHECK(bytes <= static_cast<std::size_t>(INT_MAX), op, bytes, " bytes in one message (at most ", INT_MAX, ")");
  return static_cast<int>(bytes);
}

int live_communicators = 0;  // MPI is finalised with the last

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
  auto* node = static_cast<MPI_Comm*>(node_comm_);
  MPI_Comm_free(node);
  delete node;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (--live_communicators == 0 && !finalized) MPI_Finalize();
}

void Communicator::barrier() const {
  if (uses_mpi_) MPI_Barrier(MPI_COMM_WORLD);
}

void Communicator::broadcast(void* data, std::size_t bytes, int root) const {
  if (uses_mpi_) MPI_Bcast(data, as_count(bytes, "broadcast"), MPI_BYTE, root, MPI_COMM_WORLD);
}

std::vector<double> Communicator::all_gather(const std::vector<double>& values) const {
  if (!uses_mpi_) return values;
  std::vector<double> all(values.size() * static_cast<std::size_t>(size_));
  MPI_Allgather(values.data(), as_count(values.size(), "all_gather"), MPI_DOUBLE, all.data(),
                as_count(values.size(), "all_gather"), MPI_DOUBLE, MPI_COMM_WORLD);
  return all;
}

bool Communicator::any(bool flag) const {
  if (!uses_mpi_) return flag;
  int mine = flag ? 1 : 0, anyone = 0;
  MPI_Allreduce(&mine, &anyone, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  return anyone != 0;
}

void Communicator::abort(const std::string& message, int code) const {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  if (uses_mpi_) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void Communicator::send(const void* data, std::size_t bytes, int to, int tag) const {
  XGRAD_CHECK(uses_mpi_, "send", "needs a job started by mpirun");
  MPI_Send(data, as_count(bytes, "send"), MPI_BYTE, to, tag, MPI_COMM_WORLD);
}

void Communicator::receive(void* data, std::size_t bytes, int from, int tag) const {
  XGRAD_CHECK(uses_mpi_, "receive", "needs a job started by mpirun");
  MPI_Recv(data, as_count(bytes, "receive"), MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
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
