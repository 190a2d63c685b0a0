#define BOOST_TEST_MODULE engine
#include "helpers.hpp"

#include <map>

#include "xgrad/autograd/version.hpp"
#include "xgrad/optim/sgd.hpp"

using namespace xgrad;
using namespace xgrad::test;

BOOST_AUTO_TEST_CASE(tensor_basics) {
  Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::float64);
  BOOST_CHECK(t.shape() == (Shape{2, 3}));
  BOOST_CHECK_EQUAL(t.numel(), 6u);
  BOOST_CHECK_EQUAL(t.size(-1), 3u);
  BOOST_CHECK(t.dtype() == DType::float64);
  BOOST_CHECK(t.is_leaf());
  BOOST_CHECK(!t.requires_grad());
  BOOST_CHECK_EQUAL(t.data<double>()[4], 5.0);
  BOOST_CHECK_EQUAL(sum(t).item(), 21.0);
  check_error([&] { t.item(); }, {"item", "[2, 3]"});
  check_error([&] { t.data<float>(); }, {"float32", "float64"});
  check_error([] { Tensor::from_vector({1, 2, 3}, {2, 2}); }, {"from_vector", "[2, 2]"});
  BOOST_CHECK(!Tensor().defined());
}

BOOST_AUTO_TEST_CASE(copies_share_the_node) {
  Tensor a = Tensor::zeros({2});
  Tensor b = a;  // a handle, not a copy of the data
  b.data<float>()[0] = 7;
  BOOST_CHECK_EQUAL(a.data<float>()[0], 7.0f);
  Tensor c = a.clone();
  c.data<float>()[0] = 1;
  BOOST_CHECK_EQUAL(a.data<float>()[0], 7.0f);
}

BOOST_AUTO_TEST_CASE(simple_gradients) {
  Tensor x = Tensor::from_vector({2.0}, {}, DType::float64, true);
  Tensor y = x * x * x + 2.0 * x;  // dy/dx = 3x^2 + 2 = 14
  y.backward();
  BOOST_CHECK_CLOSE(x.grad().item(), 14.0, 1e-12);
  BOOST_CHECK(!y.is_leaf());
  BOOST_CHECK_EQUAL(std::string(y.op_name()), "add");
}

BOOST_AUTO_TEST_CASE(diamond_graph_sums_both_paths) {
  // y = a*b + a*c with b = 2a, c = exp(a): a is reached along three paths.
  Tensor a = Tensor::from_vector({0.5, -1.0}, {2}, DType::float64, true);
  Tensor b = 2.0 * a;
  Tensor c = exp(a);
  Tensor y = sum(a * b + a * c);
  y.backward();
  const auto g = a.grad().to_vector();
  const auto v = a.to_vector();
  for (int i = 0; i < 2; ++i) BOOST_CHECK_CLOSE(g[i], 4 * v[i] + std::exp(v[i]) * (1 + v[i]), 1e-10);
}

// add's and sub's identity gradients are handed over, not copied, where the input has none
// yet and nothing else holds the output's (BackwardContext::take_grad): the taken array
// must then be the input's alone. Residual adds whose inputs are used again (added into
// after the take), a leaf reached first through an add, a tensor added to itself, a second
// pass over a retained graph, and a seed the caller keeps.
BOOST_AUTO_TEST_CASE(identity_gradients_handed_over_stay_the_inputs_own) {
  Tensor a = Tensor::from_vector({0.5, -1.0, 2.0}, {3}, DType::float64, true);
  Tensor b = Tensor::from_vector({1.5, 0.25, -0.75}, {3}, DType::float64, true);
  // h = a + b takes its gradient into b (b has none yet); b * a and h + h add to it after.
  const auto f = [](const std::vector<Tensor>& in) {
    const Tensor h = in[0] + in[1];
    const Tensor r = (h + h) * in[1] - in[0];
    return sum(r * r) + sum(in[1] * in[0]);
  };
  check_gradients(f, {a, b});
  const Tensor y = f({a, b});
  y.backward(/*retain_graph=*/true);
  const std::vector<double> ga = a.grad().to_vector(), gb = b.grad().to_vector();
  y.backward();
  for (std::size_t i = 0; i < 3; ++i) {
    BOOST_CHECK_CLOSE(a.grad().to_vector()[i], 2 * ga[i], 1e-12);
    BOOST_CHECK_CLOSE(b.grad().to_vector()[i], 2 * gb[i], 1e-12);
  }
  // A non-scalar root: the seed stays the caller's.
  Tensor c = Tensor::from_vector({1.0, 2.0}, {2}, DType::float64, true);
  const Tensor seed = Tensor::from_vector({3.0, 4.0}, {2}, DType::float64);
  (c + c).backward(seed);
  check_close(c.grad().to_vector(), {6.0, 8.0});
  check_close(seed.to_vector(), {3.0, 4.0});
  c.grad().data<double>()[0] = 100.0;  // the leaf's gradient, not shared with the seed or another leaf
  check_close(seed.to_vector(), {3.0, 4.0});
}

BOOST_AUTO_TEST_CASE(node_used_twice_as_both_operands) {
  Tensor x = Tensor::from_vector({3.0}, {}, DType::float64, true);
  Tensor y = x * x;
  (y * y).backward();  // d(x^4)/dx = 4x^3
  BOOST_CHECK_CLOSE(x.grad().item(), 108.0, 1e-12);
}

BOOST_AUTO_TEST_CASE(gradients_accumulate_across_backward_calls) {
  Tensor x = Tensor::from_vector({1.0, 2.0}, {2}, DType::float64, true);
  sum(x * 3.0).backward();
  const Tensor first = x.grad();
  const Tensor snapshot = x.grad().clone();
  sum(x * 3.0).backward();
  check_close(x.grad().to_vector(), {6.0, 6.0});
  check_close(first.to_vector(), {6.0, 6.0});  // grad() shares the accumulating storage
  check_close(snapshot.to_vector(), {3.0, 3.0});
  x.zero_grad();
  BOOST_CHECK(!x.grad().defined());
  sum(x).backward();
  check_close(x.grad().to_vector(), {1.0, 1.0});
}

BOOST_AUTO_TEST_CASE(retain_graph_allows_a_second_backward) {
  Tensor x = Tensor::from_vector({1.5}, {}, DType::float64, true);
  Tensor y = exp(x) * x;
  y.backward(/*retain_graph=*/true);
  const double once = x.grad().item();
  y.backward();
  BOOST_CHECK_CLOSE(x.grad().item(), 2 * once, 1e-12);
  // Now the graph is freed: a third pass is an error that says what to do.
  check_error([&] { y.backward(); }, {"backward", "freed", "retain_graph"});
}

BOOST_AUTO_TEST_CASE(freed_graph_is_detected_below_the_root) {
  Tensor x = Tensor::from_vector({1.0, 2.0}, {2}, DType::float64, true);
  Tensor shared = exp(x);
  sum(shared).backward();
  check_error([&] { sum(shared * 2.0).backward(); }, {"backward", "exp", "freed"});
}

BOOST_AUTO_TEST_CASE(non_scalar_root_needs_a_seed) {
  Tensor x = randn64({2, 3}, 1);
  Tensor y = x * 2.0;
  check_error([&] { y.backward(); }, {"backward", "[2, 3]", "seed"});
  check_error([&] { y.backward(Tensor::ones({3, 2}, DType::float64)); }, {"backward", "[3, 2]", "[2, 3]"});
  y.backward(Tensor::full({2, 3}, 0.5, DType::float64));
  check_close(x.grad().to_vector(), std::vector<double>(6, 1.0));
}

BOOST_AUTO_TEST_CASE(backward_without_grad_is_an_error) {
  Tensor x = Tensor::ones({2});
  check_error([&] { sum(x).backward(); }, {"backward", "does not require grad"});
  Tensor p = Tensor::ones({2}).requires_grad_();
  check_error([&] { (p * 2.0).requires_grad_(false); }, {"requires_grad_", "mul_scalar"});
}

BOOST_AUTO_TEST_CASE(no_grad_guard_records_nothing) {
  Tensor x = randn64({3}, 2);
  {
    NoGradGuard guard;
    BOOST_CHECK(!grad_enabled());
    Tensor y = x * 2.0;
    BOOST_CHECK(!y.requires_grad());
    BOOST_CHECK(y.is_leaf());
    { NoGradGuard nested; }
    BOOST_CHECK(!grad_enabled());  // the inner guard restores the outer state
  }
  BOOST_CHECK(grad_enabled());
  BOOST_CHECK((x * 2.0).requires_grad());
}

BOOST_AUTO_TEST_CASE(detach_stops_gradient_and_shares_data) {
  Tensor x = Tensor::from_vector({2.0}, {}, DType::float64, true);
  Tensor d = x.detach();
  BOOST_CHECK(!d.requires_grad());
  (x * d).backward();  // d is a constant: gradient is d = 2, not 2x = 4
  BOOST_CHECK_CLOSE(x.grad().item(), 2.0, 1e-12);
  x.data<double>()[0] = 5.0;
  BOOST_CHECK_EQUAL(d.item(), 5.0);
}

BOOST_AUTO_TEST_CASE(dtype_conversion_is_differentiable) {
  Tensor x = Tensor::from_vector({0.25, 0.5}, {2}, DType::float32, true);
  Tensor y = x.to(DType::float64);
  BOOST_CHECK(y.dtype() == DType::float64);
  sum(y * y).backward();
  BOOST_CHECK(x.grad().dtype() == DType::float32);
  check_close(x.grad().to_vector(), {0.5, 1.0});
}

BOOST_AUTO_TEST_CASE(a_chain_of_100000_ops) {
  // Backward must not recurse and the graph must not be freed recursively either.
  Tensor x = Tensor::from_vector({1.0}, {}, DType::float64, true);
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0 + 0.0;
  y.backward();
  BOOST_CHECK_CLOSE(x.grad().item(), 1.0, 1e-12);
  // Drop a retained chain too: its destruction is iterative.
  Tensor z = x;
  for (int i = 0; i < 100000; ++i) z = z + 1e-5;
  z.backward(true);
  BOOST_CHECK_CLOSE(z.item(), 2.0, 1e-9);
  z = Tensor();
}

BOOST_AUTO_TEST_CASE(unreached_branches_get_no_gradient) {
  Tensor x = randn64({2}, 4);
  Tensor unused = randn64({2}, 5);
  Tensor side = unused * 3.0;  // never part of the loss
  sum(x * 2.0).backward();
  BOOST_CHECK(!unused.grad().defined());
  BOOST_CHECK(x.grad().defined());
}

BOOST_AUTO_TEST_CASE(anomaly_mode_names_the_op_in_forward) {
  Tensor x = Tensor::from_vector({1.0, -1.0}, {2}, DType::float64, true);
  BOOST_CHECK_NO_THROW(log(x));  // NaN silently without the guard, as in PyTorch
  AnomalyModeGuard guard;
  BOOST_CHECK(anomaly_mode_enabled());
  check_error([&] { log(x); }, {"anomaly", "log", "forward", "[2]"});
}

BOOST_AUTO_TEST_CASE(anomaly_mode_names_the_op_in_backward) {
  // sqrt(0) is finite but its gradient is infinite.
  Tensor x = Tensor::from_vector({0.0, 4.0}, {2}, DType::float64, true);
  AnomalyModeGuard guard;
  Tensor y = sum(sqrt(x));
  check_error([&] { y.backward(); }, {"anomaly", "sqrt", "backward"});
}

BOOST_AUTO_TEST_CASE(the_library_reports_the_headers_version) {
  BOOST_CHECK_EQUAL(std::string(version()), XGRAD_VERSION);
  BOOST_CHECK_EQUAL(std::string(XGRAD_VERSION),
                    str(XGRAD_VERSION_MAJOR, ".", XGRAD_VERSION_MINOR, ".", XGRAD_VERSION_PATCH));
}

BOOST_AUTO_TEST_CASE(grad_ready_hooks_see_finished_gradients_before_the_pass_ends) {
  // a is used twice (its gradient is b + d c only once both uses ran); d at the bottom of
  // a chain; e at the very top. Each hook records the gradient it sees.
  Tensor a = Tensor::from_vector({1, 2}, {2}, DType::float64).requires_grad_();
  Tensor d = Tensor::from_vector({3, 4}, {2}, DType::float64).requires_grad_();
  Tensor e = Tensor::from_vector({5, 6}, {2}, DType::float64).requires_grad_();
  const Tensor b = Tensor::from_vector({7, 8}, {2}, DType::float64);
  const Tensor c = Tensor::from_vector({9, 10}, {2}, DType::float64);
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> seen;
  for (auto& [name, leaf] : std::vector<std::pair<std::string, Tensor*>>{{"a", &a}, {"d", &d}, {"e", &e}})
    leaf->add_grad_ready_hook([&, name = name](const Tensor& t) {
      order.push_back(name);
      seen[name] = t.grad().to_vector();
    });
  Tensor chain = d;
  for (int i = 0; i < 5; ++i) chain = chain * 1.0;
  const Tensor loss = sum(a * b) + sum(chain * a * c) + sum(e);
  loss.backward();
  BOOST_CHECK(seen["a"] == a.grad().to_vector());  // complete when seen: b + d * c
  BOOST_CHECK(seen["a"] == (std::vector<double>{7 + 27, 8 + 40}));
  BOOST_CHECK(seen["d"] == d.grad().to_vector());
  BOOST_CHECK(seen["e"] == e.grad().to_vector());
  BOOST_REQUIRE_EQUAL(order.size(), 3u);
  BOOST_CHECK_EQUAL(order.front(), "e");  // finished first, with the rest of the pass still to run
  // A pass that does not reach a leaf does not call its hook; removed hooks are not called.
  order.clear();
  sum(e * 2.0).backward();
  BOOST_CHECK(order == std::vector<std::string>{"e"});
  Tensor f = Tensor::from_vector({1}, {1}, DType::float64).requires_grad_();
  int calls = 0;
  const std::size_t first = f.add_grad_ready_hook([&](const Tensor&) { ++calls; });
  f.add_grad_ready_hook([&](const Tensor&) { calls += 10; });
  f.remove_grad_ready_hook(first);
  sum(f).backward();
  BOOST_CHECK_EQUAL(calls, 10);
  check_error([&] { f.remove_grad_ready_hook(first); }, {"remove_grad_ready_hook", "no hook 0"});
  check_error([&] { (f * 2.0).add_grad_ready_hook([](const Tensor&) {}); }, {"add_grad_ready_hook", "not a leaf"});
  // A hook that throws ends the pass with its error, and the next pass runs.
  Tensor g = Tensor::from_vector({1}, {1}, DType::float64).requires_grad_();
  const std::size_t failing = g.add_grad_ready_hook([](const Tensor&) { throw Error("hook failed"); });
  check_error([&] { sum(g * 3.0).backward(); }, {"hook failed"});
  g.remove_grad_ready_hook(failing);
  g.zero_grad();
  sum(g * 3.0).backward();
  BOOST_CHECK_EQUAL(g.grad().item(), 3.0);
}

// PyTorch's handle.remove() inside the hook: a hook may change the hooks while they run.
// The ones there when the gradient was ready run (each unless an earlier one removed it);
// one added runs from the next pass; ids are never reused.
BOOST_AUTO_TEST_CASE(a_hook_may_remove_itself_or_others_and_add_hooks) {
  Tensor x = Tensor::ones({3}, DType::float64).requires_grad_();
  std::vector<std::string> calls;
  std::size_t once = 0, removed = 0;
  once = x.add_grad_ready_hook([&](const Tensor& leaf) {
    Tensor(leaf).remove_grad_ready_hook(once);  // its own closure must outlive this call
    calls.push_back("once");
    Tensor(leaf).remove_grad_ready_hook(removed);
    Tensor(leaf).add_grad_ready_hook([&](const Tensor&) { calls.push_back("added"); });
  });
  removed = x.add_grad_ready_hook([&](const Tensor&) { calls.push_back("removed"); });
  x.add_grad_ready_hook([&](const Tensor&) { calls.push_back("kept"); });
  sum(x * 2.0).backward();
  BOOST_CHECK((calls == std::vector<std::string>{"once", "kept"}));
  calls.clear();
  sum(x * 2.0).backward();
  BOOST_CHECK((calls == std::vector<std::string>{"kept", "added"}));
  BOOST_CHECK_EQUAL(x.grad().to_vector()[0], 4.0);
  // The id of the last hook removed is not given to the next one.
  Tensor y = Tensor::ones({1}, DType::float64).requires_grad_();
  y.add_grad_ready_hook([](const Tensor&) {});
  const std::size_t last = y.add_grad_ready_hook([](const Tensor&) {});
  y.remove_grad_ready_hook(last);
  BOOST_CHECK_NE(y.add_grad_ready_hook([](const Tensor&) {}), last);
  check_error([&] { y.remove_grad_ready_hook(last); }, {"remove_grad_ready_hook", "no hook"});
}

// In-place changes between forward and backward (PyTorch's version counter): the
// gradient would belong to other values, or (a new shape) overrun its buffer.
BOOST_AUTO_TEST_CASE(changing_a_saved_tensor_before_backward_is_an_error) {
  const auto fresh = [] { return Tensor::from_vector({3.0, 4.0}, {2}, DType::float64, true); };
  {  // set_data to another shape
    Tensor x = fresh();
    Tensor y = sum(x * x);
    x.set_data(Tensor::ones({1 << 16}, DType::float64));
    check_error([&] { y.backward(); }, {"mul", "input 0", "[65536]", "changed in place"});
  }
  {  // set_data to another dtype (Module::to)
    Tensor x = fresh();
    Tensor y = sum(x * x);
    x.set_data(Tensor::ones({2}, DType::float32));
    check_error([&] { y.backward(); }, {"mul", "float32", "changed in place"});
  }
  {  // a write through data<T>(), same shape: silently 2 * 10 otherwise
    Tensor x = fresh();
    Tensor y = sum(x * x);
    x.data<double>()[0] = 10.0;
    check_error([&] { y.backward(); }, {"mul", "changed in place"});
  }
  {  // through a detached handle: the same storage
    Tensor x = fresh();
    Tensor y = sum(x * x);
    x.detach().data<double>()[1] = 0.0;
    check_error([&] { y.backward(); }, {"mul", "changed in place"});
  }
  {  // an op's output, which the next op recorded and exp's backward reads
    Tensor x = fresh();
    Tensor e = exp(x);
    Tensor y = sum(e);
    e.data<double>()[0] = 0.0;
    check_error([&] { y.backward(); }, {"sum", "input 0", "changed in place"});
    check_error([&] { e.backward(Tensor::ones({2}, DType::float64)); }, {"exp", "output", "changed in place"});
  }
  {  // an optimizer step between two passes over one graph
    Tensor w = fresh();
    Tensor loss = sum(w * w);
    loss.backward(/*retain_graph=*/true);
    optim::SGD sgd({{"w", w}}, {.lr = 0.1});
    sgd.step();
    check_error([&] { loss.backward(); }, {"mul", "changed in place"});
  }
  {  // reading is not changing: a const handle, to_vector, item
    Tensor x = fresh();
    Tensor y = sum(x * x);
    const Tensor& read = x;
    BOOST_CHECK_EQUAL(read.data<double>()[0], 3.0);
    BOOST_CHECK_EQUAL(x.to_vector()[1], 4.0);
    y.backward();
    check_close(x.grad().to_vector(), {6.0, 8.0});
  }
  {  // a change after backward, then a new forward: fine
    Tensor x = fresh();
    sum(x * x).backward();
    x.data<double>()[0] = 1.0;
    x.zero_grad();
    sum(x * x).backward();
    check_close(x.grad().to_vector(), {2.0, 8.0});
  }
}

// A leaf whose branch finished before another branch threw keeps no gradient of that pass,
// whichever operand came first; one that held a gradient before keeps it.
BOOST_AUTO_TEST_CASE(a_pass_that_throws_leaves_no_gradient_on_a_leaf_that_had_none) {
  for (bool a_first : {true, false}) {
    Tensor a = Tensor::from_vector({1, 2, 3}, {3}, DType::float64, true);
    Tensor b = Tensor::from_vector({1, 1, 1}, {3}, DType::float64, true);
    Tensor held = Tensor::from_vector({5}, {1}, DType::float64, true);
    sum(held * 2.0).backward();
    const Tensor loss = a_first ? sum(a * 2.0) + sum(b * b) + sum(held) : sum(b * b) + sum(held) + sum(a * 2.0);
    b.data<double>()[0] = 7;  // changed after mul used it: its backward throws
    check_error([&] { loss.backward(); }, {"mul", "changed in place"});
    BOOST_CHECK(!a.grad().defined());
    BOOST_CHECK(!b.grad().defined());
    BOOST_REQUIRE(held.grad().defined());
  }
}

BOOST_AUTO_TEST_CASE(a_pass_that_throws_leaves_no_partial_gradients_behind) {
  // sqrt's gradient at 0 is infinite: anomaly mode stops the pass after mul's backward
  // has reached sqrt's output. Run again, the pass must not add that part twice.
  Tensor x = Tensor::from_vector({0.0, 4.0}, {2}, DType::float64, true);
  Tensor loss = sum(sqrt(x) * 3.0 + x);
  {
    AnomalyModeGuard guard;
    check_error([&] { loss.backward(/*retain_graph=*/true); }, {"anomaly", "sqrt"});
  }
  // x had no gradient before the pass: it has none after (add's part reached it first).
  BOOST_CHECK(!x.grad().defined());
  loss.backward();
  const std::vector<double> g = x.grad().to_vector();
  BOOST_CHECK(std::isinf(g[0]));
  BOOST_CHECK_CLOSE(g[1], 1.0 + 3.0 / (2.0 * 2.0), 1e-12);
}
