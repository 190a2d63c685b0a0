#include "signals.hpp"

#include <unistd.h>

#include <csignal>
#include <thread>

#include "xgrad/autograd/files.hpp"

namespace tools {

namespace {
volatile std::sig_atomic_t interrupted = 0;

void on_interrupt(int signal) {
  if (interrupted) {                             // the second: at once, a checkpoint half written removed
    if (xgrad::signal_deferred(signal)) return;  // a model's files being renamed into place
    xgrad::remove_unfinished_outputs();
    ::_exit(128 + signal);
  }
  interrupted = signal;
}
}  // namespace

void catch_interrupts() {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
}

int interrupt_signal() { return interrupted; }

void interrupt_as(int signal) { interrupted = signal; }

void wait_to_be_ended(std::chrono::milliseconds timeout) {
  using namespace std::chrono_literals;
  for (auto waited = 0ms; waited < 3 * timeout && !interrupted; waited += 100ms) std::this_thread::sleep_for(100ms);
}

}  // namespace tools
