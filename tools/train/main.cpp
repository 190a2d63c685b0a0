// xgrad-train: trains a transformer from the command line (a toy sequence task, or a GPT
// on a text's bytes or on token shards), with held-out evaluation, metrics, a learning
// curve, checkpoints, resume and fine-tuning, and samples of what was learned.
// `xgrad-train --help` lists the flags; trainer.hpp is the run itself.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "cli.hpp"
#include "config.hpp"
#include "language_model.hpp"
#include "preflight.hpp"
#include "signals.hpp"
#include "trainer.hpp"
#include "workload.hpp"
#include "xgrad/autograd/blas.hpp"
#include "xgrad/autograd/denormals.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/distributed/communicator.hpp"
#include "xgrad/models/config.hpp"

using namespace xgrad;
using namespace tools;

namespace {

// What every rank of a job must share, each as a fingerprint: the settings a checkpoint
// records, the data (its size and fingerprint, its vocabulary or tokenizer), and the
// checkpoint it starts from (its metadata: settings, step, curve). Ranks each read their
// own flags and files (on their own hosts), and only the weights go out from rank 0: a
// rank given another --lr, a stale copy of the text or of the checkpoint would train on,
// silently.
struct RankRecord {
  std::uint64_t data = 0, start = 0, settings = 0;  // in this order, as the first that differs is named
};

std::uint64_t fingerprint_of(const Metadata& metadata) {
  std::string bytes;
  for (const auto& [key, value] : metadata) bytes += str(key.size(), ":", key, value.size(), ":", value);
  return fingerprint(bytes);
}

RankRecord rank_record(const Config& c, const LanguageData* data, const Start& start,
                       const std::optional<models::ModelConfig>& published) {
  Metadata data_record;
  if (data) data->add_metadata(data_record);
  // The settings a checkpoint records, and those it does not that change what a rank
  // does: how it starts (a resume loads the optimizer's state), whether it trains, and a
  // published model's whole config (from a Hugging Face folder or --model-config, whose
  // weights come from rank 0 but whose rope_theta or epsilon are each rank's own).
  Metadata settings = to_metadata(c);
  // Where the data lies may differ between hosts (the default text is a path compiled
  // into each host's build): what it holds is the data's fingerprint's to compare.
  for (const Flag& path : {flag(&Config::text), flag(&Config::data), flag(&Config::tokenizer)})
    settings.erase("run." + path.name()), settings.erase("config." + path.name());
  settings["rank.resume"] = start.resume ? "1" : "0";
  settings["rank.eval_only"] = c.eval_only ? "1" : "0";
  if (published) settings["rank.model_config"] = models::model_config_json(*published);
  return {.data = fingerprint_of(data_record),
          .start = start.flag ? fingerprint_of(start.contents.metadata) : 0,
          .settings = fingerprint_of(settings)};
}

// How long the ranks wait for each other's set-up (see run).
constexpr std::chrono::milliseconds kSetUpTimeout = std::chrono::minutes(15);

// Whether every rank's record is rank 0's; if not, what differs, naming the first rank
// that differs. A collective: every rank calls it.
std::optional<std::string> ranks_disagree(const distributed::Communicator& communicator, const RankRecord& record) {
  std::vector<double> halves;  // each 64-bit fingerprint as two 32-bit halves, which doubles hold exactly
  for (const std::uint64_t part : {record.data, record.start, record.settings})
    halves.push_back(static_cast<double>(part >> 32)), halves.push_back(static_cast<double>(part & 0xffffffffu));
  const std::vector<double> all = communicator.all_gather(halves);
  const std::size_t parts = halves.size();
  // A rank's data or checkpoint that differs makes settings drawn from them differ too
  // (the vocabulary, the step): named first.
  const char* what[] = {"data (another text, or other shards or tokenizer)",
                        "checkpoint to start from (another step, settings or curve)",
                        "settings (other flags, or the checkpoint's)"};
  for (std::size_t part = 0; part < parts; part += 2)
    for (std::size_t rank = 1; rank * parts < all.size(); ++rank)
      if (all[rank * parts + part] != all[part] || all[rank * parts + part + 1] != all[part + 1])
        return str("rank ", rank, " was given other ", what[part / 2], " than rank 0: every rank must be given ",
                   "the same flags and the same files (on every host)");
  return std::nullopt;
}

// Everything before training: the settings, files and outputs checked, the model made.
// Nothing here talks to the other ranks.
std::unique_ptr<Trainer> set_up(int argc, char** argv, Config& c, distributed::Communicator& communicator,
                                RankRecord& record) {
  c.ranks = communicator.size();
  Given given;
  if (!parse_command_line(argc, argv, c, given)) return nullptr;  // --help or --version
  // A Hugging Face directory says which family it holds, and that the task is lm (and the
  // defaults made from them follow: --lora-targets, --seq-len).
  if (is_hf_directory(c.init_from)) {
    Given kept = given;
    if (!given.count(flag(&Config::model).name())) {
      c.model = hf_model_family(c.init_from);
      kept.insert(flag(&Config::model).name());
    }
    if (!given.count(flag(&Config::task).name())) {
      c.task = "lm";
      kept.insert(flag(&Config::task).name());
    }
    settings_of<Config>().apply_defaults(c, kept);
  }
  const Start start = read_start(c);
  check_size_flags(given, start);
  const auto recorded = [&](const char* key) {
    const auto found = start.contents.metadata.find(key);
    return found != start.contents.metadata.end() ? found->second : std::string();
  };
  c.started_from = start.resume ? recorded("init_from") : c.init_from;
  c.base_model = is_hf_directory(c.init_from) ? c.init_from : recorded("base_model");
  try {
    if (start.flag && start.resume) {
      apply_metadata(start.contents.metadata, c, given);
      // --text and --data are one choice: the one given replaces the one carried on.
      if (given.count(flag(&Config::data).name()) && !given.count(flag(&Config::text).name())) c.text.clear();
      // New shards name their tokenizer anew: their folder's, unless given.
      if (given.count(flag(&Config::data).name()) && !given.count(flag(&Config::tokenizer).name()))
        c.tokenizer = c.data;
      if (given.count(flag(&Config::text).name()) && !given.count(flag(&Config::data).name())) c.data.clear();
    }
    if (start.flag && !start.resume) apply_model_metadata(start.contents.metadata, c, given, holds_adapters(start));
  } catch (const UsageError& e) {
    throw UsageError(str(start.source(), ": ", e.what()));
  }
  check_task_flags(c, given);
  check_adapters(c, start);
  if (start.flag)
    validate_read(c, start.contents.metadata, given, start.source());
  else
    validate(c);
  if (given.count(flag(&Config::comm_timeout).name()) && communicator.size() == 1)
    throw SettingError(flag(&Config::comm_timeout),
                       " is used by ranks waiting for each other: a run of one process has no other rank (it is for "
                       "mpirun -np 2 or more)");
  std::shared_ptr<const LanguageData> data;
  if (c.language_model()) data = open_language_data(c, start);
  const Metadata* checkpoint = start.flag ? &start.contents.metadata : nullptr;
  const std::optional<models::ModelConfig> published =
      data ? language_model_config(c, data->vocabulary_size(), checkpoint) : std::nullopt;
  check_memory(c, model_shape(c, published ? &*published : nullptr, model_config_source(c, checkpoint)),
               communicator.local_size(), data ? data->resident_bytes() : 0);
  record = rank_record(c, data.get(), start, published);
  if (!communicator.is_root()) {  // rank 0 alone prints and writes
    c.save.clear(), c.save_hf.clear(), c.metrics.clear(), c.plot.clear(), c.attention_png.clear();
    c.quiet = true;
  }
  check_outputs(c);
  if (c.threads > 0)
    set_num_threads(c.threads);
  else if (communicator.local_size() > 1)  // the machine's cores shared among its ranks
    set_num_threads(std::max(1, num_threads() / communicator.local_size()));
  if (c.verbose)
    std::cout << "xgrad-train: BLAS " << blas_summary() << ", " << num_threads()
              << (num_threads() == 1 ? " thread" : " threads")
              << (communicator.size() > 1 ? str(" in each of ", communicator.size(), " ranks") : std::string())
              << "; products in " << c.precision
              << (c.precision == "bf16" ? str(" (", bf16_summary(), ")") : std::string()) << std::endl;
  manual_seed(c.seed);
  return std::make_unique<Trainer>(
      c, communicator, c.language_model() ? make_language_workload(c, data, checkpoint) : make_toy_workload(c), start);
}

// Under mpirun the ranks first agree that every one of them could set up: a bad flag or
// file then ends every rank with exit code 2 (rank 0 saying why, or the rank that failed
// alone), instead of some ranks waiting for the others forever; then that they were all
// given the same run (RankRecord). Those two waits allow each rank its whole set-up
// (reading and fingerprinting shards from a cold cache can take minutes on one host
// alone), up to kSetUpTimeout; every later one --comm-timeout.
int run(int argc, char** argv, distributed::Communicator& communicator) {
  Config c;
  std::unique_ptr<Trainer> trainer;
  std::optional<std::string> error;
  RankRecord record;
  const std::chrono::milliseconds default_timeout = communicator.timeout();
  const auto run_timeout = [&] {
    return c.comm_timeout > 0 ? std::chrono::milliseconds(std::llround(c.comm_timeout * 1000)) : default_timeout;
  };
  communicator.set_timeout(kSetUpTimeout);
  try {
    trainer = set_up(argc, argv, c, communicator, record);
  } catch (const std::exception& e) {
    error = unbroken(e.what());
  }
  try {
    const std::vector<double> failed = communicator.all_gather({error ? 1.0 : 0.0});
    if (std::find(failed.begin(), failed.end(), 1.0) != failed.end()) {
      if (error && (communicator.is_root() || failed[0] == 0.0))
        std::fprintf(stderr, "xgrad-train: %s%s\n",
                     communicator.is_root() ? "" : str("rank ", communicator.rank(), ": ").c_str(), error->c_str());
      return 2;
    }
    if (const std::optional<std::string> differs = ranks_disagree(communicator, record)) {
      if (communicator.is_root()) std::fprintf(stderr, "xgrad-train: %s\n", differs->c_str());
      return 2;
    }
  } catch (const distributed::CommunicationError&) {
    communicator.set_timeout(run_timeout());  // the report waits 3 x it for mpirun to end the job
    throw;
  }
  if (!trainer) return 0;
  communicator.set_timeout(run_timeout());
  set_flush_denormal(!c.keep_denormals);
  // Every forward of the run (training, evaluation, samples) runs on this thread.
  const AutocastGuard precision(c.precision == "bf16" ? Precision::bfloat16 : Precision::float32);
  trainer->start();
  return trainer->run();
}

}  // namespace

// Every error is one line on stderr and exit status 2; a signal exits with 128 + its
// number after saving. Under mpirun only rank 0 prints, and an error on any rank ends the
// whole job with its message (MPI_Abort) rather than leaving the others waiting; a broken
// communication, where MPI_Abort could not reach the other ranks, is said by each rank
// that meets it (rank 0 having saved), and mpirun ends the job (wait_to_be_ended).
int main(int argc, char** argv) {
  distributed::Communicator communicator;
  if (!communicator.is_root() && !std::freopen("/dev/null", "w", stdout)) return 2;
  return tools::run_tool(
      "xgrad-train", [&] { return run(argc, argv, communicator); },
      [&](const std::string& line, const std::exception& error) {
        if (dynamic_cast<const EveryRankError*>(&error)) {  // every rank stops here: rank 0 says why
          if (communicator.is_root()) std::fprintf(stderr, "%s\n", line.c_str());
          return;
        }
        if (communicator.size() == 1) {
          std::fprintf(stderr, "%s\n", line.c_str());
          return;
        }
        if (dynamic_cast<const distributed::CommunicationError*>(&error)) {
          // Rank 0 speaks for the job at once; another rank only when mpirun did not end it
          // (its line would go out over the link that may be cut, see wait_to_be_ended).
          const auto say = [&] {
            std::fprintf(stderr, "xgrad-train: rank %d: %s\n", communicator.rank(), unbroken(error.what()).c_str());
          };
          if (communicator.is_root()) say();
          std::fflush(stderr);
          wait_to_be_ended(communicator.timeout());
          if (!communicator.is_root() && !was_interrupted()) say();
          return;
        }
        communicator.abort(str("xgrad-train: rank ", communicator.rank(), ": ", unbroken(error.what())));
      });
}
