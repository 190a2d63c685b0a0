#define BOOST_TEST_MODULE profiler
// xgrad::Profiler: the events a step reports (op names and counts of a hand-written graph),
// the trace file's format, time accounting (busy time within the wall, shares adding to
// 100%), a product's FLOPs, and that profiling changes no result bit.
#include "helpers.hpp"

#include <malloc.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>

#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/nn/profiler.hpp"
#include "xgrad/optim/adam.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

// A step of known ops: linear (its forward, its backward), relu, sum, plus Adam, on a
// seeded rows x in input and an out x in weight.
struct LinearStep {
  Tensor x, w, b;
  optim::Adam adam;

  LinearStep(std::size_t rows, std::size_t in, std::size_t out, std::uint64_t seed)
      : LinearStep(Generator(seed), rows, in, out) {}
  LinearStep(Generator gen, std::size_t rows, std::size_t in, std::size_t out)
      : x(Tensor::randn({rows, in}, gen)),
        w(Tensor::randn({out, in}, gen).requires_grad_()),
        b(Tensor::randn({out}, gen).requires_grad_()),
        adam(optim::NamedParameters{{"w", w}, {"b", b}}) {}

  Tensor run() {
    adam.zero_grad();
    const Tensor loss = sum(relu(linear(x, w, b)));
    loss.backward();
    adam.step();
    return loss;
  }
};

// Named events of each (kind, name) across the threads.
std::map<std::pair<std::string, std::string>, int> counts(const std::vector<profile::ThreadLog>& threads) {
  std::map<std::pair<std::string, std::string>, int> n;
  for (const profile::ThreadLog& t : threads)
    for (const profile::Event& e : t.events)
      if (e.name) ++n[{profile::kind_name(e.kind), e.name}];
  return n;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("xgrad-profiler-" + std::to_string(getpid()) + "-" + name))
      .string();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_step_reports_the_ops_it_ran) {
  LinearStep step(64, 32, 16, 1);
  Profiler profiler;
  for (int i = 0; i < 2; ++i) step.run();
  const auto n = counts(profiler.threads());
  const auto count = [&](const char* kind, const char* name) {
    const auto it = n.find({kind, name});
    return it == n.end() ? 0 : it->second;
  };
  for (const char* op : {"linear", "relu", "sum"}) {
    BOOST_TEST(count("forward", op) == 2, op);
    BOOST_TEST(count("backward", op) == 2, op);
  }
  BOOST_TEST(count("optimizer", "optimizer step") == 2);
  BOOST_TEST(count("engine", "graph walk") == 2);
  // linear: y = x W^T forward, dW = g^T x backward (x needs no gradient): one product each.
  BOOST_TEST(count("product", "sgemm (OpenBLAS)") == 4);
  // Nothing else was an op: every forward and backward event is one of the three.
  for (const auto& [key, number] : n)
    if (key.first == "forward" || key.first == "backward")
      BOOST_TEST((key.second == "linear" || key.second == "relu" || key.second == "sum"), key.second);
}

BOOST_AUTO_TEST_CASE(the_trace_follows_the_chrome_trace_format) {
  set_num_threads(2);
  LinearStep step(512, 256, 512, 2);
  Profiler profiler;
  step.run();
  const std::string path = temp_path("trace.json");
  profiler.save_trace(path);
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  BOOST_REQUIRE(trace.contains("traceEvents"));
  std::map<int, std::vector<std::string>> open;  // per thread: names begun, not yet ended
  std::map<int, double> last;                    // per thread: the latest timestamp
  std::set<std::string> names;
  std::size_t begins = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    const std::string ph = e.at("ph");
    const int tid = e.at("tid");
    if (ph == "M") continue;
    const double ts = e.at("ts");
    BOOST_TEST(ts >= last[tid], "timestamps go back on thread " << tid);
    last[tid] = ts;
    if (ph == "B") {
      open[tid].push_back(e.at("name"));
      names.insert(e.at("name").get<std::string>());
      ++begins;
    } else {
      BOOST_REQUIRE_EQUAL(ph, "E");
      BOOST_REQUIRE(!open[tid].empty());  // an end closes a begin of its own thread
      open[tid].pop_back();
    }
  }
  for (const auto& [tid, names_open] : open) BOOST_TEST(names_open.empty(), "thread " << tid << " left events open");
  BOOST_TEST(begins > 10u);
  for (const char* name : {"linear", "relu", "sum", "optimizer step", "pool task: linear"})
    BOOST_TEST(names.count(name) == 1u, name);
  BOOST_TEST(last.size() == 2u);  // the caller and the pool's worker each have a track
}

BOOST_AUTO_TEST_CASE(busy_time_fits_in_the_wall_and_shares_add_to_100) {
  set_num_threads(2);
  LinearStep step(256, 128, 256, 3);
  Profiler profiler;
  for (int i = 0; i < 3; ++i) step.run();
  profiler.stop();
  const double wall = profiler.wall_ms();
  for (const profile::ThreadLog& t : profiler.threads()) {
    // Top-level events of a thread do not overlap, so their sum is its busy time.
    double busy = 0;
    std::int64_t end_of_last = -1;
    for (const profile::Event& e : t.events) {
      BOOST_TEST(e.end_ns >= e.begin_ns);
      BOOST_TEST(e.end_ns <= static_cast<std::int64_t>(wall * 1e6) + 1);
      if (e.begin_ns >= end_of_last) {
        busy += static_cast<double>(e.end_ns - e.begin_ns) * 1e-6;
        end_of_last = e.end_ns;
      }
    }
    BOOST_TEST(busy <= wall * 1.0001, "thread " << t.thread << ": " << busy << " ms busy in " << wall << " ms");
  }
  for (const bool by_shape : {false, true}) {
    const std::vector<ProfileRow> rows = profiler.rows(by_shape);
    const double total =
        std::accumulate(rows.begin(), rows.end(), 0.0, [](double s, const ProfileRow& r) { return s + r.share; });
    BOOST_TEST(std::abs(total - 100.0) < 1e-6, total);
    for (std::size_t i = 1; i < rows.size(); ++i) BOOST_TEST(rows[i - 1].self_ms >= rows[i].self_ms);
  }
  const std::string table = profiler.table();
  BOOST_TEST_MESSAGE(table);
  BOOST_TEST(table.find("linear") != std::string::npos);
  BOOST_TEST(table.find("sgemm (OpenBLAS)") != std::string::npos);
}

// The FLOPs of a product are 2 m n k, however it was cut into library calls.
BOOST_AUTO_TEST_CASE(a_products_flops_are_2mnk) {
  set_num_threads(2);
  Generator gen(4);
  for (const auto& [m, k, n] : std::vector<std::array<std::size_t, 3>>{{7, 5, 3}, {600, 300, 500}, {40, 3000, 50}})
    for (const Precision precision : {Precision::float32, Precision::bfloat16}) {
      const Tensor a = Tensor::randn({m, k}, gen), b = Tensor::randn({k, n}, gen);
      Profiler profiler;
      {
        const AutocastGuard guard(precision);
        matmul(a, b);
      }
      double flops = 0;
      for (const profile::ThreadLog& t : profiler.threads())
        for (const profile::Event& e : t.events)
          if (e.name && e.kind == profile::Kind::product) flops += e.flops;
      BOOST_TEST(flops == 2.0 * static_cast<double>(m * n * k), m << " x " << k << " x " << n);
    }
}

// Profiling reads clocks only: a profiled step gives the same bits as an unprofiled one.
BOOST_AUTO_TEST_CASE(profiling_changes_no_result_bit) {
  set_num_threads(2);
  const auto train = [](bool profiled) {
    LinearStep step(300, 64, 128, 5);
    std::vector<double> losses;
    std::optional<Profiler> profiler;
    if (profiled) profiler.emplace();
    for (int i = 0; i < 3; ++i) losses.push_back(step.run().item());
    std::vector<double> out = step.w.to_vector();
    out.insert(out.end(), losses.begin(), losses.end());
    return out;
  };
  const std::vector<double> plain = train(false), profiled = train(true);
  BOOST_TEST(plain == profiled, boost::test_tools::per_element());
}

// A recording keeps its events and their details off malloc's heap: events kept there would
// sit between the tensors' blocks and make the profiled steps touch fresh pages (medium in
// bf16 ran 25% slower profiled than not, from page faults alone, before this).
BOOST_AUTO_TEST_CASE(events_stay_off_the_heap_and_their_details_survive_stop) {
  set_num_threads(1);
  constexpr int kEvents = 200000;               // about 24 MB of events, 10 MB of details
  const std::string long_detail(3 << 20, 'x');  // longer than a chunk of the log's text
  Profiler profiler;
  const std::size_t heap_before = mallinfo2().uordblks;
  for (int i = 0; i < kEvents; ++i) {
    const profile::Scope region(profile::Kind::scope, "region");
    region.describe("a detail of fifty bytes, enough to leave std::string" + std::to_string(i));
  }
  {
    const profile::Scope region(profile::Kind::scope, "long");
    region.describe(long_detail);
  }
  const std::size_t heap_after = mallinfo2().uordblks;
  BOOST_TEST(heap_after - std::min(heap_before, heap_after) < (std::size_t{1} << 20),
             "the recording put " << heap_after - heap_before << " bytes on malloc's heap");
  profiler.stop();
  std::size_t regions = 0;
  bool long_kept = false;
  for (const profile::ThreadLog& t : profiler.threads())
    for (const profile::Event& e : t.events) {
      if (!e.name) continue;
      if (e.name == std::string_view("region")) {
        BOOST_TEST(e.detail == "a detail of fifty bytes, enough to leave std::string" + std::to_string(regions));
        ++regions;
      }
      if (e.name == std::string_view("long")) long_kept = e.detail == long_detail;
    }
  BOOST_TEST(regions == static_cast<std::size_t>(kEvents));
  BOOST_TEST(long_kept);
}

BOOST_AUTO_TEST_CASE(one_profiler_at_a_time_and_bad_paths_named) {
  Profiler first;
  check_error([] { Profiler second; }, {"Profiler", "another profiler"});
  check_error([&] { first.save_trace("/nonexistent-folder/trace.json"); }, {"/nonexistent-folder/trace.json"});
  Profiler after;  // the first stopped (save_trace ends its recording): a new one may start
  BOOST_TEST(after.wall_ms() >= 0.0);
}
