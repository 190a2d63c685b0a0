#define BOOST_TEST_MODULE settings
// The tools' tables of settings (tools/common/settings.hpp) on a small table of their
// own: defaults per recipe and made from other settings, the range checks, the refusal
// of flags that mean nothing, the checkpoint's record, its agreement checks and what is
// read back, --help.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "settings.hpp"
#include "xgrad/autograd/error.hpp"

namespace {

struct Demo {
  std::string kind;
  int size = 0, warm = 0;
  double rate = 0;
  std::optional<double> target;
  bool fast = false;
  std::string out;
};

const tools::Recipe<Demo> big{"big", [](const Demo& d) { return d.kind == "big"; }};

// The demo program's table, found by settings_of<Demo>() beside Demo.
tools::Settings<Demo> settings_table(std::type_identity<Demo>) {
  using namespace tools::setting;
  return {"demo",
          Text::of("a demo; see ", &Demo::size),
          {
              choice(&Demo::kind, "kind", {"small", "big"}).model().fallback("small"),
              whole(&Demo::size, "size").help("how big").at_least(1).model().fallback(4).with(big, 64),
              real(&Demo::rate, "rate").above(0).learning().fallback(0.5),
              whole(&Demo::warm, "warm")
                  .at_least(0)
                  .learning()
                  .fallback(0)
                  .with(
                      big, [](const Demo& d) { return d.size / 8; }, &Demo::size, "/8")
                  .unused_when(&Demo::kind, {"small"}, "only big runs warm up"),
              real(&Demo::target, "target").above(0).run(),
              toggle(&Demo::fast, "fast"),
              path(&Demo::out, "out").unused_with(&Demo::fast, "fast runs write nothing"),
          },
          {big}};
}

const tools::Settings<Demo>& kDemo = tools::settings_of<Demo>();

using tools::flag;
using tools::Given;
using tools::Metadata;

// The command line `args` parsed; `given` receives the flags given.
Demo parsed(std::vector<std::string> args, Given& given) {
  args.insert(args.begin(), "demo");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  Demo d;
  BOOST_REQUIRE(!kDemo.parse(static_cast<int>(argv.size()), argv.data(), d, given));
  return d;
}

void check_message(const std::function<void()>& f, const std::string& expected) {
  try {
    f();
    BOOST_ERROR("expected \"" << expected << "\", nothing was thrown");
  } catch (const tools::UsageError& e) {
    BOOST_CHECK_EQUAL(e.what(), expected);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(defaults_follow_the_recipe_and_what_was_given) {
  Given given;
  const Demo small = parsed({}, given);
  BOOST_CHECK(given.empty());
  BOOST_CHECK_EQUAL(small.kind, "small");
  BOOST_CHECK_EQUAL(small.size, 4);
  BOOST_CHECK_EQUAL(small.warm, 0);
  const Demo large = parsed({"--kind", "big"}, given);
  BOOST_CHECK(given == Given{"kind"});
  BOOST_CHECK_EQUAL(large.size, 64);
  BOOST_CHECK_EQUAL(large.warm, 8);  // made from --size
  const Demo sized = parsed({"--kind", "big", "--size", "16"}, given = {});
  BOOST_CHECK_EQUAL(sized.warm, 2);  // from the --size given
  BOOST_CHECK(!sized.target);
  BOOST_CHECK_EQUAL(parsed({"--target", "0.25"}, given = {}).target.value_or(0), 0.25);
}

BOOST_AUTO_TEST_CASE(flags_and_keys_come_from_the_rows) {
  BOOST_CHECK_EQUAL(flag(&Demo::warm).dashed(), "--warm");
  BOOST_CHECK_EQUAL(xgrad::str(flag(&Demo::size), " 3"), "--size 3");
  BOOST_CHECK_EQUAL(kDemo.key(&Demo::size), "config.size");
  BOOST_CHECK_EQUAL(kDemo.key(&Demo::target), "run.target");
}

BOOST_AUTO_TEST_CASE(ranges_and_meaningless_flags) {
  Demo d = kDemo.defaults();
  kDemo.check(d);
  d.size = 0;
  check_message([&] { kDemo.check(d); }, "--size must be at least 1, got 0");
  d = kDemo.defaults();
  d.rate = 0;
  check_message([&] { kDemo.check(d); }, "--rate must be positive, got 0.0");
  d.rate = std::nan("");
  check_message([&] { kDemo.check(d); }, "--rate must be a finite number, got nan");
  d = kDemo.defaults();
  d.kind = "huge";  // as a checkpoint may hold it
  check_message([&] { kDemo.check(d); }, "--kind huge is not one of small, big");
  Given given;
  d = kDemo.defaults();
  check_message([&] { kDemo.refuse_unused(d, {"warm"}); },
                "--warm is not used by --kind small (only big runs warm up)");
  d.fast = true;
  check_message([&] { kDemo.refuse_unused(d, {"out"}); }, "--out is not used by --fast (fast runs write nothing)");
  kDemo.refuse_unused(d, {"size", "fast"});
  check_message([&] { parsed({"--out", ""}, given); }, "--out needs a file name, got \"\"");
}

BOOST_AUTO_TEST_CASE(the_checkpoint_record) {
  Demo d = kDemo.defaults();
  const Metadata record = kDemo.record(d);
  BOOST_CHECK(record == (Metadata{{"config.kind", "small"},
                                  {"config.size", "4"},
                                  {"config.rate", "0.5"},
                                  {"config.warm", "0"}}));  // no unset target, nothing local
  d.target = 0.1;
  BOOST_CHECK_EQUAL(kDemo.record(d).at("run.target"), "0.10000000000000001");  // exact

  // A flag given must agree; a setting the checkpoint lacks is an error.
  Demo here = kDemo.defaults();
  here.size = 16;
  check_message([&] { kDemo.agree(record, here, {"size"}, {tools::Kind::model}); },
                "the checkpoint is from another config: --size 16 here, 4 in the checkpoint");
  kDemo.agree(record, here, {}, {tools::Kind::model});  // not given: taken from the checkpoint
  Metadata partial = record;
  partial.erase("config.rate");
  check_message([&] { kDemo.agree(partial, here, {}, {tools::Kind::learning}); },
                "the checkpoint has no setting for --rate (not written by this demo?)");

  // Read back: every setting of the kinds asked, a run setting only where not given.
  Metadata saved = kDemo.record(d);
  saved["config.size"] = "12";
  saved["run.target"] = "0.5";
  Demo back = kDemo.defaults();
  const Given read = kDemo.read(saved, back, {"target"}, {tools::Kind::model, tools::Kind::run});
  BOOST_CHECK(read == (Given{"kind", "size"}));
  BOOST_CHECK_EQUAL(back.size, 12);
  BOOST_CHECK(!back.target);
  saved["config.size"] = "12x";
  check_message([&] { kDemo.read(saved, back, {}, {tools::Kind::model}); },
                "the checkpoint's config.size = '12x' is not a whole number in range");

  // A bad setting the checkpoint brought is said as the checkpoint's.
  saved["config.size"] = "0";
  kDemo.read(saved, back, {}, {tools::Kind::model});
  try {
    kDemo.check(back);
    BOOST_ERROR("size 0 passed the check");
  } catch (const tools::SettingError& e) {
    check_message([&] { kDemo.explain(e, saved, {}, "--from x.st"); },
                  "--from x.st: the checkpoint's config.size = '0' cannot be used: must be at least 1, got 0");
    check_message([&] { kDemo.explain(e, saved, {"size"}, "--from x.st"); }, "--size must be at least 1, got 0");
  }
}

BOOST_AUTO_TEST_CASE(help_shows_every_row_and_its_defaults) {
  std::string help;
  {
    std::vector<std::string> args = {"demo", "--help"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    std::ostringstream out;
    std::streambuf* const old = std::cout.rdbuf(out.rdbuf());
    Demo d;
    Given given;
    const std::optional<int> printed = kDemo.parse(2, argv.data(), d, given);
    std::cout.rdbuf(old);
    BOOST_CHECK(printed == 0);
    help = out.str();
  }
  for (const char* part :
       {"demo: a demo; see --size\n", "Usage: demo [flags]", "The model: kept in the checkpoint",
        "  --size N                  how big [4; big 64]\n", "  --kind NAME               small | big [small]",
        "  --warm N                  [0; big --size/8]\n", "  --fast\n", "  --out PATH\n"})
    BOOST_CHECK_MESSAGE(help.find(part) != std::string::npos, "--help lacks \"" << part << "\":\n" << help);
}
