#include "preflight.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "memory.hpp"
#include "timeline.hpp"
#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/nn/checkpoint.hpp"

namespace tools {

namespace {

// What a path names: an existing file by device and inode (so links and different
// spellings of one file agree), a file not made yet by its absolute, resolved path.
struct FileIdentity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string path;

  bool operator==(const FileIdentity& other) const {
    if (exists != other.exists) return false;
    return exists ? device == other.device && inode == other.inode : path == other.path;
  }
};

FileIdentity identify(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) return {true, info.st_dev, info.st_ino, ""};
  std::error_code error;
  std::filesystem::path absolute =
      std::filesystem::weakly_canonical(std::filesystem::absolute(xgrad::resolve_symlinks(path)), error)
          .lexically_normal();
  if (!absolute.has_filename()) absolute = absolute.parent_path();  // "dir/" and "dir/." name dir
  return {false, 0, 0, error ? path : absolute.string()};
}

std::string folder_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

struct Output {
  Flag flag;
  const std::string& path;
  bool replaced;        // written as a new file renamed over the old one (else opened and appended to)
  bool folder = false;  // --save-hf's (check_hf_target checks it)
};

// A file the run reads, which no output may name.
struct Input {
  Flag flag;
  const std::string& path;
  const char* what;  // "the checkpoint being resumed"
  const char* kind;  // "the checkpoint"
};

void check_writable(const Output& out) {
  const std::string target = xgrad::resolve_symlinks(out.path);
  struct stat info {};
  if (::stat(target.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) throw UsageError(xgrad::str(out.flag, " ", out.path, ": is a folder"));
    if (out.replaced && !S_ISREG(info.st_mode))
      throw UsageError(
          xgrad::str(out.flag, " ", out.path, ": is a device or FIFO, not a file (refusing to replace it)"));
    if (S_ISFIFO(info.st_mode)) {
      const int fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // ENXIO: nobody reads it
      if (fd < 0) throw UsageError(xgrad::str(out.flag, " ", out.path, ": a FIFO nobody reads"));
      ::close(fd);
    }
    if (!out.replaced && ::access(target.c_str(), W_OK) == 0) return;
  }
  const std::string folder = folder_of(target);
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw UsageError(
        xgrad::str(out.flag, " ", out.path, ": cannot write in ", folder, " (", std::strerror(errno), ")"));
  const long name_max = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  const std::size_t name = std::filesystem::path(target).filename().string().size();
  if (name_max > 0 && name > static_cast<std::size_t>(name_max))
    throw UsageError(xgrad::str(out.flag, " ", out.path, ": the file name is ", name, " bytes long, more than the ",
                                name_max, " its file system allows"));
  // A file made there and removed: access() says yes to root where nothing can be made
  // (/proc, a file system mounted read-only), and the run would train before finding out.
  const std::string probe = (std::filesystem::path(folder) / xgrad::temporary_name(target, ::getpid(), 0)).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw UsageError(
        xgrad::str(out.flag, " ", out.path, ": cannot make a file in ", folder, " (", std::strerror(errno), ")"));
  ::close(fd);
  ::unlink(probe.c_str());
}

// The task of the xgrad-train checkpoint at `path`; nothing when it is not one. The
// header is looked at first, so that a text or a picture is not read whole.
std::optional<std::string> checkpoint_task(const std::string& path, std::uintmax_t size) {
  std::ifstream in(path, std::ios::binary);
  unsigned char length[8] = {};
  char first = 0;
  if (!in.read(reinterpret_cast<char*>(length), sizeof length) || !in.get(first) || first != '{') return std::nullopt;
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | length[i];
  if (header > size - 8) return std::nullopt;
  try {
    const xgrad::nn::Metadata metadata = xgrad::nn::read_safetensors(path).metadata;
    const auto by = metadata.find("written_by"), task = metadata.find(settings_of<Config>().key(&Config::task));
    if (by == metadata.end() || by->second != "xgrad-train" || task == metadata.end()) return std::nullopt;
    return task->second;
  } catch (const xgrad::Error&) {
    return std::nullopt;
  }
}

// An existing --save file is replaced only when it is the checkpoint being resumed, or
// another checkpoint of xgrad-train for the same task (a run started again); never a
// text, a picture, another program's file or another task's model. An empty file holds
// nothing to lose.
void check_save_target(const Config& c) {
  if (c.save.empty()) return;
  const std::string target = xgrad::resolve_symlinks(c.save);
  struct stat info {};
  if (::stat(target.c_str(), &info) != 0 || info.st_size == 0) return;
  if (!c.resume.empty() && identify(c.resume) == identify(c.save)) return;
  const std::optional<std::string> task = checkpoint_task(target, static_cast<std::uintmax_t>(info.st_size));
  if (!task)
    throw UsageError(xgrad::str(flag(&Config::save), " ", c.save,
                                ": the file exists and is not a checkpoint of xgrad-train (refusing to replace it: "
                                "remove it or choose another name)"));
  if (*task != c.task)
    throw UsageError(xgrad::str(flag(&Config::save), " ", c.save, ": the file holds a checkpoint of ",
                                flag(&Config::task), " ", *task, " (refusing to replace it with one of ",
                                flag(&Config::task), " ", c.task, ": remove it or choose another name)"));
}

// --save-hf: a folder that holds no model yet (one may be there from an earlier run: never
// replaced), made at the end, so its nearest existing folder must take new files.
void check_hf_target(const Config& c) {
  if (c.save_hf.empty()) return;
  const Flag save_hf = flag(&Config::save_hf);
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::is_symlink(fs::symlink_status(c.save_hf, error)) && !fs::exists(c.save_hf, error))
    throw UsageError(xgrad::str(save_hf, " ", c.save_hf, ": is a link to nothing (name the folder itself)"));
  if (fs::exists(c.save_hf, error)) {
    if (!fs::is_directory(c.save_hf, error))
      throw UsageError(xgrad::str(save_hf, " ", c.save_hf, ": is ", xgrad::kind_of_file(c.save_hf), ", not a folder"));
    for (const char* name : {"config.json", "model.safetensors", "model.safetensors.index.json", "vocab.json",
                             "merges.txt", "adapter_config.json", "adapter_model.safetensors"})
      if (fs::exists(fs::path(c.save_hf) / name, error))
        throw UsageError(xgrad::str(save_hf, " ", c.save_hf, ": already holds ", name,
                                    " (refusing to replace a model: remove it or choose another folder)"));
  }
  fs::path existing = fs::absolute(c.save_hf, error);
  while (!existing.empty() && !fs::exists(existing, error)) existing = existing.parent_path();
  if (!fs::is_directory(existing, error) || ::access(existing.c_str(), W_OK | X_OK) != 0)
    throw UsageError(xgrad::str(save_hf, " ", c.save_hf, ": cannot write in ", existing.string()));
  // A folder made there and removed, as check_writable's file: access() says yes to root
  // in /proc and on read-only mounts.
  const fs::path probe = existing / xgrad::temporary_name((existing / "hf").string(), ::getpid(), 0);
  if (::mkdir(probe.c_str(), 0700) != 0 && errno != EEXIST)  // one left by a run killed here: the folder takes them
    throw UsageError(xgrad::str(save_hf, " ", c.save_hf, ": cannot make a folder in ", existing.string(), " (",
                                std::strerror(errno), ")"));
  ::rmdir(probe.c_str());
}

// Whether the file at `path` begins with one of `openings`.
bool opens_with(const std::string& path, std::initializer_list<std::string_view> openings) {
  std::ifstream in(path, std::ios::binary);
  char head[32] = {};  // longer than every opening checked
  in.read(head, sizeof head);
  const std::string_view read(head, static_cast<std::size_t>(in.gcount()));
  return std::any_of(openings.begin(), openings.end(), [&](std::string_view o) { return read.starts_with(o); });
}

// An existing, non-empty --metrics, --plot or --attention-png file is written over (or,
// for the metrics of a resumed run, added to) only when it holds what the flag writes: a
// metrics file of xgrad-train, a PNG. A text or a model named by mistake is kept.
void check_existing_kind(const Flag& flag, const std::string& path, std::initializer_list<std::string_view> openings,
                         const char* kind) {
  if (path.empty()) return;
  const std::string target = xgrad::resolve_symlinks(path);
  struct stat info {};
  if (::stat(target.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_size == 0) return;
  if (!opens_with(target, openings))
    throw UsageError(xgrad::str(flag, " ", path, ": the file exists and is not ", kind,
                                " (refusing to write over it: remove it or choose another name)"));
}

}  // namespace

void check_outputs(const Config& c) {
  const std::string trace = c.profile.empty() ? "" : profile_trace_path(c.profile),
                    timeline = c.profile.empty() ? "" : profile_timeline_path(c.profile);
  const Flag save = flag(&Config::save), metrics = flag(&Config::metrics), plot = flag(&Config::plot),
             attention_png = flag(&Config::attention_png), profile = flag(&Config::profile),
             resume = flag(&Config::resume), save_hf = flag(&Config::save_hf);
  const std::vector<Output> outputs = {{save, c.save, true},
                                       {metrics, c.metrics, false},
                                       {plot, c.plot, true},
                                       {attention_png, c.attention_png, true},
                                       {profile, trace, true},
                                       {profile, timeline, true},
                                       {save_hf, c.save_hf, true, true}};
  const std::string no_text;
  const std::vector<Input> inputs = {
      {resume, c.resume, "the checkpoint being resumed", "the checkpoint"},
      {flag(&Config::init_from), c.init_from, "the checkpoint the run starts from", "the checkpoint"},
      {flag(&Config::text), c.language_model() ? c.text : no_text, "the text being learned", "the text"}};
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Output& out = outputs[i];
    if (out.path.empty()) continue;
    if (!out.folder) check_writable(out);
    const FileIdentity id = identify(out.path);
    for (const Input& in : inputs) {
      if (in.path.empty() || !(identify(in.path) == id)) continue;
      if (out.flag.name() == save.name() && in.flag.name() == resume.name()) continue;  // updated in place
      throw UsageError(xgrad::str(out.flag, " ", out.path, " is ", in.what, " (", in.flag, " ", in.path,
                                  "); writing it would destroy ", in.kind));
    }
    for (const Output& other : outputs)  // the model's folder is its own
      if (out.folder && &other != &out && !other.path.empty() && identify(folder_of(other.path)) == id)
        throw UsageError(xgrad::str(other.flag, " ", other.path, " is inside ", out.flag, " ", out.path,
                                    ": that folder is the model's alone"));
    for (std::size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && identify(outputs[j].path) == id)
        throw UsageError(xgrad::str(out.flag, " ", out.path, " and ", outputs[j].flag, " ", outputs[j].path,
                                    " are the same file; each output needs its own"));
  }
  check_save_target(c);
  check_hf_target(c);
  check_existing_kind(metrics, c.metrics, {"{\"step\": ", "{\"final\": "}, "a metrics file of xgrad-train");
  check_existing_kind(plot, c.plot, {kPngSignature}, "a PNG");
  check_existing_kind(attention_png, c.attention_png, {kPngSignature}, "a PNG");
  check_existing_kind(profile, timeline, {kPngSignature}, "a PNG");
  check_existing_kind(profile, trace, {kTraceOpening}, "a trace of xgrad's profiler");
}

void check_output_file(const Flag& flag, const std::string& path, std::initializer_list<std::string_view> openings,
                       const char* kind) {
  check_writable({flag, path, true});
  check_existing_kind(flag, path, openings, kind);
}

ModelShape model_shape(const Config& c, const xgrad::models::ModelConfig* published, const std::string& source) {
  namespace models = xgrad::models;
  ModelShape m;
  if (!published) {  // xgrad's own GPT or a toy task's model, sized by the flags
    m.width = c.d_model, m.ff = static_cast<double>(c.ff_width()), m.layers = c.layers, m.vocab = c.vocab;
    m.query_width = m.kv_width = m.width;
    const double d = m.width;
    m.parameters = 2 * m.vocab * d + c.seq_len * d + m.layers * (4 * d * d + 2 * d * m.ff + 10 * d + m.ff) + m.vocab;
    m.trained = m.parameters;
    m.sized_by = xgrad::str(flag(&Config::vocab), " ", c.vocab, ", ", flag(&Config::d_model), " ", c.d_model, ", ",
                            flag(&Config::layers), " ", c.layers, ", ", flag(&Config::ff), " ", c.ff_width());
    return m;
  }
  // Each layer's linears side by side, inputs and outputs summed: LoRA's r columns of A
  // and rows of B for each, were every one a target.
  double adapted = 0;
  if (const auto* g = std::get_if<models::GPT2Config>(published)) {
    m.width = static_cast<double>(g->n_embd), m.ff = static_cast<double>(g->inner());
    m.layers = static_cast<double>(g->n_layer), m.vocab = static_cast<double>(g->vocab_size);
    m.query_width = m.kv_width = m.width;
    adapted = 8 * m.width + 2 * m.ff;  // c_attn, attn.c_proj, c_fc, mlp.c_proj
  } else {
    const auto& l = std::get<models::LlamaConfig>(*published);
    m.width = static_cast<double>(l.hidden_size), m.ff = static_cast<double>(l.intermediate_size);
    m.layers = static_cast<double>(l.num_hidden_layers), m.vocab = static_cast<double>(l.vocab_size);
    m.query_width = static_cast<double>(l.attention_width());
    m.kv_width = static_cast<double>(l.kv_heads()) * static_cast<double>(l.head_width());
    m.ff_values = 4;                                                        // gate, up, SiLU(gate), their product
    adapted = 7 * m.width + 2 * m.query_width + 2 * m.kv_width + 3 * m.ff;  // q, k, v, o; gate, up, down
  }
  m.parameters = models::model_size(*published).parameters;
  m.adapters = c.lora * (m.layers * adapted + m.width + m.vocab);
  m.trained = c.lora > 0 ? std::min(m.parameters, m.adapters) : m.parameters;
  m.sized_by = source.empty()
                   ? xgrad::str(flag(&Config::model), " ", c.model, ", ", flag(&Config::d_model), " ", c.d_model, ", ",
                                flag(&Config::layers), " ", c.layers, ", ", flag(&Config::ff), " ", count_text(m.ff))
                   : source;
  return m;
}

void check_memory(const Config& c, const ModelShape& m, int ranks_here, std::size_t text_bytes) {
  // float32 throughout. Parameters, each trained one with a gradient and Adam's two
  // moments. Activations kept for backward, per token and layer: the block's input,
  // norms, residuals and projections (6 d), q (3 times: itself, turned, attention's
  // output), k and v (3 times), the MLP's columns (GELU's 3, SwiGLU's 4); and twice that
  // for the block running backward (its gradients); logits 4 x vocab per token; for one
  // micro-batch at a time. (Measured peaks, xgrad-train at widths 64 and 256: 0.7 to 0.95
  // of the per-layer count.) Under --recompute only each block's input is kept, and one
  // block's values while it runs backward. The reducer keeps each of the rank's micro-batches'
  // gradients (so that their sum is the same in any number of processes), and every rank
  // its own copy of the text; each rank on this machine needs all of it. In bf16 the
  // products also keep their operands rounded (2 bytes a value) for backward: every
  // weight, and per token the inputs of the layers' linears, attention's q, k and v, and
  // the head's input (d). Under --eval-only nothing is trained: the weights and one batch's evaluation. Weights read
  // from a file are held twice while they load (the model, and the file's tensors in float32).
  const double d = m.width, ff = m.ff, L = c.seq_len, micro_batches = static_cast<double>(c.micro_batches());
  const bool bf16 = c.precision == "bf16";
  const double trained = c.eval_only ? 0 : m.trained;
  const double adapters = c.lora > 0 ? m.adapters * 4 : 0;  // their own values, besides the base's
  const double state = m.parameters * 4 + adapters + trained * 3 * 4 + (bf16 ? m.parameters * 2 : 0);
  // A checkpoint is read whole (its optimizer state too) before the model and optimizer
  // take their copies; a Hugging Face folder's tensors are the weights, once.
  const std::string& start = c.resume.empty() ? c.init_from : c.resume;
  std::error_code no_size;
  const double start_file = start.empty() || std::filesystem::is_directory(start, no_size)
                                ? 0
                                : static_cast<double>(std::filesystem::file_size(start, no_size));
  const double loading = start.empty() ? 0 : state + std::max(start_file, m.parameters * 4);
  // While the model is made, each weight's new values are drawn beside its zeros: the
  // weights and the largest table (the embedding, an MLP's or attention's projection).
  const double making = (m.parameters + m.width * std::max({m.vocab, m.ff, 3 * m.query_width})) * 4;
  // The reducer (when there are several micro-batches, over ranks or accumulation) keeps
  // this rank's micro-batches' gradients and their sum.
  const double reducer = micro_batches > 1 && !c.eval_only ? (c.accum_steps + 1.0) * trained * 4 : 0;
  const double block = 6 * d + 3 * m.query_width + 3 * m.kv_width + m.ff_values * ff;
  const double rounded = 2 * d + 2 * m.query_width + 2 * m.kv_width + ff;
  const double blocks_kept = (c.recompute ? m.layers * d + block : m.layers * block) + 2 * block;
  const double per_token = blocks_kept + 4 * m.vocab + 4 * d;
  const double rounded_per_token = bf16 ? (c.recompute ? 1 : m.layers) * rounded + d : 0;
  const double training = c.eval_only ? 0 : c.batch / micro_batches * L * (per_token * 4 + rounded_per_token * 2);
  const double evaluation = (c.language_model() ? c.batch : std::min(500.0, static_cast<double>(c.eval_size))) * L *
                            (3 * d + ff + 2 * m.vocab) * 4;
  // --task lm keeps its evaluation windows for the run: --eval-batches batches of each
  // split, each token an input and a target id of 8 bytes, each batch about 512 bytes of
  // its own (its two arrays and shapes).
  const double windows = c.language_model() ? 2.0 * c.eval_batches * (c.batch * L * 2 * 8 + 512) : 0;
  // The libraries: about 0.25 GiB. Under an address-space limit (`ulimit -v`), which counts
  // memory reserved and never touched, each thread's OpenBLAS buffer (128 MiB, mapped
  // whole) and glibc arena (64 MiB) too: OpenBLAS waits forever for a buffer it cannot map.
  constexpr double kRuntime = 256.0 * 1024 * 1024, kPerThreadReserved = 192.0 * 1024 * 1024;
  const double threads = c.threads > 0 ? c.threads : std::max(1u, std::thread::hardware_concurrency());
  const double reserved = xgrad::address_space_limited() ? threads * kPerThreadReserved : 0;
  const double per_rank = kRuntime + reserved + static_cast<double>(text_bytes) + windows +
                          std::max({state + reducer + std::max(training, evaluation), loading, making});
  const double needed = per_rank * std::max(ranks_here, 1);
  const auto available = static_cast<double>(xgrad::usable_memory_bytes());
  if (needed <= available) return;
  const std::string what_is_trained =
      c.eval_only                ? xgrad::str(" (", flag(&Config::eval_only), ": none trained)")
      : m.trained < m.parameters ? xgrad::str(" and the optimizer state of the at most ", count_text(m.trained), " in ",
                                              flag(&Config::lora), " ", c.lora, "'s adapters")
                                 : std::string(" and their optimizer state");
  throw UsageError(xgrad::str(
      "the run needs about ", gib(needed), " of memory, more than the ", gib(available), " this ",
      ranks_here > 1 ? xgrad::str("machine's ", ranks_here, " ranks") : std::string("process"),
      " may use: ", gib(state), " for ", count_text(m.parameters), " parameters (", m.sized_by, ")", what_is_trained,
      bf16 ? " and bf16 copies" : "",
      loading > state
          ? xgrad::str(" (", gib(loading), " while they are read: the model, its state and the file's copy)")
      : making > state
          ? xgrad::str(" (", gib(making), " while the model is made: its weights and a table's new values)")
          : "",
      ", ", gib(c.eval_only ? evaluation : training), c.eval_only ? " to evaluate a batch" : " for the activations",
      bf16 && !c.eval_only ? " (and their bf16 copies)" : "", c.eval_only ? " (" : " of a micro-batch (",
      flag(&Config::batch), " ", c.batch, c.eval_only ? "" : xgrad::str(" / ", c.micro_batches()), " x ",
      flag(&Config::seq_len), " ", c.seq_len, c.recompute ? xgrad::str(", ", flag(&Config::recompute)) : "", ")",
      reducer > 0 ? xgrad::str(", ", gib(reducer), " for the gradients of ", c.accum_steps,
                               c.accum_steps == 1 ? " micro-batch" : " micro-batches", " and their sum")
                  : "",
      windows > 0 ? xgrad::str(", ", gib(windows), " for the evaluation windows (", flag(&Config::eval_batches), " ",
                               c.eval_batches, " of each split)")
                  : "",
      text_bytes > 0 ? xgrad::str(", ", gib(static_cast<double>(text_bytes)), " for the text") : "",
      reserved > 0 ? xgrad::str(", ", gib(reserved), " reserved by ", static_cast<int>(threads),
                                threads == 1 ? " thread" : " threads",
                                " (BLAS buffers and allocator arenas, which an address-space limit counts)")
                   : "",
      ranks_here > 1 ? xgrad::str(", in each of ", ranks_here, " ranks") : ""));
}

}  // namespace tools
