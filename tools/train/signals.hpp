#pragma once
// xgrad-train and signals: Ctrl-C or SIGTERM asks the run to save and stop at the next
// step (or evaluation chunk); a second one exits at once (the checkpoint on disk is always
// whole: it is replaced atomically).

#include <chrono>

namespace tools {

void catch_interrupts();  // from now on, SIGINT and SIGTERM are noted rather than fatal
int interrupt_signal();   // the signal that came, or 0
inline bool was_interrupted() { return interrupt_signal() != 0; }
void interrupt_as(int signal);  // as if `signal` had come here (another rank's)

// After a communication of the job broke (a link down, a rank stuck or gone), a rank stays
// until mpirun ends it rather than exiting: the word of its exit would go out over the cut
// link, and mpirun and its daemon there would wait for TCP to give up (about 15 minutes).
// Left idle, the link's keepalive (docs/distributed.md) makes Open MPI end every process
// of the job. A rank not ended within 3 x `timeout` (its peers stuck, not gone, or no
// keepalive set), or interrupted, returns.
void wait_to_be_ended(std::chrono::milliseconds timeout);

}  // namespace tools
