#include "xgrad/models/pretrained.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/nn/checkpoint.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/text/vocabulary_files.hpp"

namespace xgrad::models {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string in_dir(const std::string& dir) { return "model directory '" + dir + "'"; }

// A directory's tensors, each with its dtype in the file, and what errors about them name
// (the one file, or the index).
struct DirectoryTensors {
  StateDict tensors;
  std::map<std::string, std::string> dtypes;
  std::string source;
};

// The tensors of a sharded checkpoint: every shard the index names, each tensor found in
// the shard the index gives for it.
DirectoryTensors read_sharded(const fs::path& dir, const fs::path& index_path) {
  const std::string source = "model index '" + index_path.string() + "'";
  json index;
  try {
    index = json::parse(read_regular_file(index_path.string(), source));
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past double (1e400)
    fail(source, "not JSON (", e.what(), ")");
  }
  XGRAD_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(), source,
              "field \"weight_map\" is missing or not an object");
  std::map<std::string, std::set<std::string>> names_by_shard;
  for (const auto& [name, file] : index["weight_map"].items()) {
    XGRAD_CHECK(file.is_string(), source, "field \"weight_map\": \"", name, "\" maps to ", file.dump(),
                ", not a file name");
    const std::string shard = file.get<std::string>();
    XGRAD_CHECK(!shard.empty() && shard.find('/') == std::string::npos && shard != "." && shard != "..", source,
                "field \"weight_map\": \"", name, "\" names \"", shard, "\", which is not a file in the directory");
    names_by_shard[shard].insert(name);
  }
  DirectoryTensors read;
  read.source = source;
  for (const auto& [shard, names] : names_by_shard) {
    const fs::path path = dir / shard;
    XGRAD_CHECK(fs::exists(path), source, "names shard \"", shard, "\", which is not in ", dir.string());
    nn::SafetensorsContents contents = nn::read_safetensors(path.string());
    for (const std::string& name : names) {
      const auto found = contents.tensors.find(name);
      XGRAD_CHECK(found != contents.tensors.end(), source, "puts \"", name, "\" in shard \"", shard,
                  "\", which does not hold it");
      read.tensors[name] = found->second;
      read.dtypes[name] = contents.dtypes[name];
    }
    for (const auto& named : contents.tensors)
      XGRAD_CHECK(names.count(named.first), source, "shard \"", shard, "\" holds \"", named.first,
                  "\", which the index does not list for it");
  }
  return read;
}

// The directory's tensors: with both the one file and an index, the one file, as
// transformers' from_pretrained looks for it first.
DirectoryTensors read_tensors(const std::string& dir) {
  const fs::path index = fs::path(dir) / kIndexFile, single = fs::path(dir) / kSingleFile;
  if (fs::exists(single)) {
    nn::SafetensorsContents contents = nn::read_safetensors(single.string());
    return {std::move(contents.tensors), std::move(contents.dtypes), "model file '" + single.string() + "'"};
  }
  XGRAD_CHECK(fs::exists(index), in_dir(dir), "holds neither ", kSingleFile, " nor ", kIndexFile);
  return read_sharded(dir, index);
}

// Whether two tensors hold the same values, element by element in place (a NaN equals a
// NaN in the same place: a copy of a matrix holding one is the same matrix).
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  if (a.dtype() != b.dtype()) return a.to(DType::float64).to_vector() == b.to(DType::float64).to_vector();
  const auto same = [&](const auto* x, const auto* y) {
    for (std::size_t i = 0; i < a.numel(); ++i)
      if (x[i] != y[i] && !(std::isnan(x[i]) && std::isnan(y[i]))) return false;
    return true;
  };
  return a.dtype() == DType::float64 ? same(a.data<double>(), b.data<double>())
                                     : same(a.data<float>(), b.data<float>());
}

// The file's tensors under the model's names, checked against what the model expects: each
// a float (F32, F64, F16 or BF16; safetensors readers take integers and booleans for masks
// and indices, which no weight is), buffers the model ignores aside (GPT-2's attn.bias was
// saved as U8 or BOOL).
StateDict match_tensors(const PretrainedModel& model, DirectoryTensors file, DType target) {
  const std::string& source = file.source;
  const std::map<std::string, Shape> expected = model.hf_shapes();
  StateDict matched;
  std::map<std::string, std::string> named_as;  // the model's name -> the file's
  std::vector<std::string> extra, missing, mismatched;
  const std::string tied = model.tied_embedding();
  const Tensor* tied_head = nullptr;  // lm_head.weight of a tied model: its embedding if the file has no other
  for (auto& [file_name, tensor] : file.tensors) {
    std::string name = file_name;
    if (!expected.count(name) && expected.count(model.base_prefix() + name)) name = model.base_prefix() + name;
    const std::string& dtype = file.dtypes[file_name];
    const bool a_float = dtype == "F32" || dtype == "F64" || dtype == "F16" || dtype == "BF16";
    if (model.ignored_on_load(name)) {
      if (!tied.empty() && name == "lm_head.weight" && a_float) tied_head = &tensor;
      continue;
    }
    XGRAD_CHECK(a_float, source, "\"", file_name, "\" is ", dtype,
                ": a model's weights are floats (F32, F64, F16 or BF16)");
    const auto [earlier, first] = named_as.emplace(name, file_name);
    XGRAD_CHECK(first, source, "holds ", name, " twice, as \"", earlier->second, "\" and as \"", file_name, "\"");
    const auto want = expected.find(name);
    if (want == expected.end()) {
      extra.push_back(file_name);
    } else if (want->second != tensor.shape()) {
      mismatched.push_back(str(name, " is ", tensor.shape(), " in the file, ", want->second, " in the model"));
    } else {
      matched[name] = tensor;
    }
  }
  if (tied_head && !named_as.count(tied)) {
    if (expected.at(tied) == tied_head->shape())
      matched[tied] = *tied_head;
    else
      mismatched.push_back(str(tied, " (as lm_head.weight, the head tied to it) is ", tied_head->shape(),
                               " in the file, ", expected.at(tied), " in the model"));
  } else if (tied_head) {
    // Both: the head must be the embedding it is tied to, or one of them would be dropped.
    const auto embedding = matched.find(tied);
    XGRAD_CHECK(embedding == matched.end() || same_values(*tied_head, embedding->second), source,
                "holds lm_head.weight ", tied_head->shape(), " beside ", tied, ", but they differ, and ",
                "config.json ties them (tie_word_embeddings): one of them would be dropped");
  }
  // A finite value past float32's range would become an infinity.
  if (target == DType::float32)
    for (const auto& [name, tensor] : matched)
      if (tensor.dtype() == DType::float64) {
        const double* values = tensor.data<double>();
        for (std::size_t i = 0; i < tensor.numel(); ++i)
          XGRAD_CHECK(!std::isfinite(values[i]) || std::isfinite(static_cast<float>(values[i])), source, "\"", name,
                      "\" holds ", values[i], ", past float32's range: the model in float32 would hold an infinity");
      }
  for (const auto& named : expected)
    if (!matched.count(named.first) && std::find_if(mismatched.begin(), mismatched.end(), [&](const std::string& m) {
                                         return m.starts_with(named.first + " is ");
                                       }) == mismatched.end())
      missing.push_back(named.first);
  XGRAD_CHECK(mismatched.empty(), source, "shapes differ from those config.json calls for: ", listed(mismatched, "; "));
  XGRAD_CHECK(missing.empty(), source, "tensors missing: ", listed(missing));
  XGRAD_CHECK(extra.empty(), source, "tensors the ", model.type_name(), " does not have: ", listed(extra));
  return matched;
}

constexpr std::array<const char*, 4> kTokenizerFiles = {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe"};

bool is_tokenizer_file(const std::string& name) {
  return std::find(kTokenizerFiles.begin(), kTokenizerFiles.end(), name) != kTokenizerFiles.end();
}

// Whether `name` is a shard's, as save_pretrained names them ("model-00001-of-00003.safetensors").
bool is_shard_name(const std::string& name) {
  static const std::regex shard(R"(model-[0-9]{5,}-of-[0-9]{5,}\.safetensors)");
  return std::regex_match(name, shard);
}

// The model's files in a directory: what an earlier save left (files, or links; not a
// model_ema.safetensors or a folder of a shard's name, which no save writes).
std::vector<fs::path> model_files(const fs::path& dir) {
  std::vector<fs::path> found;
  if (!fs::is_directory(dir)) return found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    std::error_code ignored;
    if (entry.is_directory(ignored) && !entry.is_symlink(ignored)) continue;
    if (name == "config.json" || name == kSingleFile || is_shard_name(name) || name == kIndexFile)
      found.push_back(entry.path());
  }
  return found;
}

// Removes `path` if it is a plain file (a link is left: writing goes through it).
void remove_plain_file(const fs::path& path, const std::string& source) {
  std::error_code error;
  if (!fs::is_regular_file(fs::symlink_status(path, error))) return;
  fs::remove(path, error);
  XGRAD_CHECK(!error, source, "cannot remove the old ", path.filename().string(), " (", error.message(), ")");
}

// Shard names in order, each with the names it holds: greedy in name order.
std::vector<std::vector<std::string>> plan_shards(const StateDict& tensors, std::size_t max_bytes) {
  std::vector<std::vector<std::string>> shards(1);
  std::size_t bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::size_t size = tensor.numel() * (tensor.dtype() == DType::float64 ? 8 : 4);
    if (max_bytes && bytes > 0 && bytes + size > max_bytes) shards.emplace_back(), bytes = 0;
    shards.back().push_back(name);
    bytes += size;
  }
  return shards;
}

std::string shard_name(std::size_t i, std::size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return name;
}

}  // namespace

std::unique_ptr<PretrainedModel> load_pretrained(const std::string& dir, DType dtype) {
  XGRAD_CHECK(fs::is_directory(dir), in_dir(dir), "is not a directory");
  const ModelConfig config = read_model_config((fs::path(dir) / "config.json").string());
  std::unique_ptr<PretrainedModel> model;
  {
    const nn::init::SkipInit skip;  // every parameter comes from the files
    model = make_model(config);
  }
  model->to(dtype);
  model->load_hf_state_dict(match_tensors(*model, read_tensors(dir), dtype));
  return model;
}

void save_pretrained(const PretrainedModel& model, const std::string& dir, const SaveOptions& options) {
  const std::string source = "save_pretrained '" + dir + "'";
  const StateDict tensors = model.hf_state_dict();
  for (const auto& named : tensors)
    XGRAD_CHECK(named.first.find(".lora_") == std::string::npos, source, "the model has LoRA adapters (", named.first,
                "): merge them (nn::merge_lora) or save them apart (nn::save_adapter)");
  XGRAD_CHECK(!options.tokenizer || options.tokenizer->vocabulary_size() <= model.vocab_size(), source,
              "the tokenizer has ", options.tokenizer ? options.tokenizer->vocabulary_size() : 0,
              " ids, more than the model's vocabulary of ", model.vocab_size());
  // A model of a text's bytes: its bytes from the options or its config, never both
  // differing, never beside a tokenizer.
  const ModelConfig config = model.config();
  const std::vector<std::uint8_t>& kept_bytes = std::visit(
      [](const auto& c) -> const auto& { return c.token_ids.text_bytes; }, config);
  const std::vector<std::uint8_t>& text_bytes =
      options.text_bytes && !options.text_bytes->empty() ? *options.text_bytes : kept_bytes;
  XGRAD_CHECK(kept_bytes.empty() || text_bytes == kept_bytes, source,
              "the text bytes given are not those the model's config holds");
  XGRAD_CHECK(text_bytes.empty() || !options.tokenizer, source,
              "a model of a text's bytes (its ids are the text's distinct bytes) cannot be given a tokenizer");
  XGRAD_CHECK(text_bytes.size() <= model.vocab_size() && std::is_sorted(text_bytes.begin(), text_bytes.end()) &&
                  std::adjacent_find(text_bytes.begin(), text_bytes.end()) == text_bytes.end(),
              source, "the text bytes (", text_bytes.size(), ") must be distinct, in increasing order, ",
              "and at most the model's vocabulary of ", model.vocab_size());
  const auto shards = plan_shards(tensors, options.max_shard_bytes);
  // Every file this save writes, config.json last (a reader takes a folder without it for
  // one not yet whole).
  std::vector<fs::path> files;
  if (shards.size() == 1) {
    files.push_back(fs::path(dir) / kSingleFile);
  } else {
    for (std::size_t i = 0; i < shards.size(); ++i) files.push_back(fs::path(dir) / shard_name(i, shards.size()));
    files.push_back(fs::path(dir) / kIndexFile);
  }
  if (options.tokenizer) {
    files.push_back(fs::path(dir) / "vocab.json");
    files.push_back(fs::path(dir) / "merges.txt");
  }
  files.push_back(fs::path(dir) / "config.json");
  // Refused before anything is written: a link to nothing or a file where the folder goes
  // (a failed save would remove the link, taken for a folder it made), a model there (or
  // this save's tokenizer files) unless overwriting, and a folder where a file goes.
  std::error_code ec;
  XGRAD_CHECK(!fs::is_symlink(fs::symlink_status(dir, ec)) || fs::exists(dir, ec), source,
              "is a link to nothing: name the folder itself");
  XGRAD_CHECK(!fs::exists(dir, ec) || fs::is_directory(dir, ec), source, "is ", kind_of_file(dir), ", not a folder");
  // A name taken, by a file or by a link (to nothing, too: writing goes through it).
  const auto taken = [](const fs::path& path) {
    std::error_code ignored;
    return fs::exists(fs::symlink_status(path, ignored));
  };
  std::vector<fs::path> old_files = model_files(dir);
  // The tokenizer beside a model replaced is that model's: it goes with it, unless this
  // save writes it anew.
  if (!old_files.empty())
    for (const char* name : kTokenizerFiles)
      if (taken(fs::path(dir) / name)) old_files.push_back(fs::path(dir) / name);
  for (const fs::path& file : files) {
    XGRAD_CHECK(!fs::is_directory(file), source, file.filename().string(), " is a folder; a file goes there");
    if (taken(file) && std::find(old_files.begin(), old_files.end(), file) == old_files.end())
      old_files.push_back(file);
  }
  XGRAD_CHECK(old_files.empty() || options.overwrite, source, "already holds ", old_files.front().filename().string(),
              ": choose another directory, or overwrite");
  // A model of a text's bytes takes no tokenizer: not one already in the folder either
  // (one an overwrite replaces goes with the old model, above).
  for (const char* name : kTokenizerFiles)
    XGRAD_CHECK(text_bytes.empty() || !taken(fs::path(dir) / name) ||
                    std::find(old_files.begin(), old_files.end(), fs::path(dir) / name) != old_files.end(),
                source, "holds a tokenizer (", name, "), and a model of a text's bytes takes none: choose another ",
                "folder");
  // The folders made (the folder and the parents it lacks, each as the path goes: through
  // its links and ..) and the files new to it: removed again if the save fails half way,
  // or the process dies of a signal meanwhile.
  std::vector<fs::path> made_folders, created;
  std::vector<RemovedIfKilled> unfinished;
  std::optional<SignalsDeferred> held;  // while the files are renamed into place, to the end
  try {
    fs::path folder;
    for (const fs::path& part : fs::path(dir)) {
      folder /= part;
      if (part.empty() || ::mkdir(folder.c_str(), 0777) != 0) {
        const int error = errno;
        XGRAD_CHECK(part.empty() || error == EEXIST, source, "cannot make the folder ", folder.string(), " (",
                    std::strerror(error), ")");
        continue;
      }
      made_folders.insert(made_folders.begin(), folder);  // the innermost first
      unfinished.emplace_back(folder.string(), RemovedIfKilled::Kind::folder);
    }
    XGRAD_CHECK(fs::is_directory(dir, ec), source, "is ", kind_of_file(dir), ", not a folder");
    for (const fs::path& file : files)
      if (!taken(file)) {
        created.push_back(file);
        unfinished.emplace_back(file.string(), RemovedIfKilled::Kind::file);
      }
    // Every file goes to its temporary first: what can fail (for want of space) fails
    // with the old model untouched. Then they are renamed into place, config.json last,
    // with signals held off: no reader sees new weights beside an old config.json or
    // tokenizer (only SIGKILL, between two renames, could part them).
    std::vector<std::unique_ptr<AtomicFileWriter>> staged;
    const auto stage = [&](const fs::path& file) -> AtomicFileWriter& {
      return *staged.emplace_back(std::make_unique<AtomicFileWriter>(file.string(), source));
    };
    const auto stage_bytes = [&](const fs::path& file, const std::string& bytes) {
      AtomicFileWriter& out = stage(file);
      out.write(bytes);
      out.finish();
    };
    const nn::Metadata metadata{{"format", "pt"}};
    if (shards.size() == 1) {
      AtomicFileWriter& out = stage(files.front());
      nn::write_safetensors(out, tensors, metadata);
      out.finish();
    } else {
      json weight_map = json::object();
      std::size_t total = 0;
      for (std::size_t i = 0; i < shards.size(); ++i) {
        StateDict part;
        for (const std::string& name : shards[i]) {
          part[name] = tensors.at(name);
          weight_map[name] = shard_name(i, shards.size());
          total += part[name].numel() * (part[name].dtype() == DType::float64 ? 8 : 4);
        }
        AtomicFileWriter& out = stage(files[i]);
        nn::write_safetensors(out, part, metadata);
        out.finish();
      }
      const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
      stage_bytes(fs::path(dir) / kIndexFile, index.dump(2) + "\n");
    }
    if (options.tokenizer) {
      const text::Gpt2Vocabulary vocabulary = text::format_gpt2_vocabulary(*options.tokenizer);
      stage_bytes(fs::path(dir) / "vocab.json", vocabulary.encoder_json);
      stage_bytes(fs::path(dir) / "merges.txt", vocabulary.vocab_bpe);
    }
    stage_bytes(files.back(), model_config_json(config, {.tokenizer = options.tokenizer,
                                                         .text_bytes = &text_bytes,
                                                         .torch_dtype = dtype_name(tensors.begin()->second.dtype())}));
    held.emplace();
    // The old config.json goes first: a folder without one is a model no reader takes, so
    // a rename that fails half way (a full disk) leaves none that loads, never a mix.
    remove_plain_file(files.back(), source);
    for (std::size_t i = 0; i + 1 < staged.size(); ++i) staged[i]->commit();
    // The old model's tokenizer goes before the new config.json appears: no reader may
    // take the new model for one with that tokenizer.
    for (const fs::path& old : old_files)
      if (is_tokenizer_file(old.filename().string()) && std::find(files.begin(), files.end(), old) == files.end()) {
        std::error_code error;
        fs::remove(old, error);
        XGRAD_CHECK(!error, source, "cannot remove the old model's ", old.filename().string(), " (", error.message(),
                    ")");
      }
    staged.back()->commit();
  } catch (...) {
    std::error_code ignored;
    for (const fs::path& file : created) fs::remove(file, ignored);
    for (const fs::path& made : made_folders) fs::remove(made, ignored);  // only if empty
    throw;
  }
  unfinished.clear();                    // the new model is whole: a signal now must not remove it
  for (const fs::path& old : old_files)  // a shard layout or a tokenizer the new save does not write
    if (std::find(files.begin(), files.end(), old) == files.end()) {
      std::error_code error;
      fs::remove(old, error);
      XGRAD_CHECK(!error, source, "wrote the model, but cannot remove the old model's ", old.filename().string(), " (",
                  error.message(), ")");
    }
}

}  // namespace xgrad::models
