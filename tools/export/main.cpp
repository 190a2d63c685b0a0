// xgrad-export: a GPT-2 or Llama model, from a checkpoint of `xgrad-train --task lm` or a
// Hugging Face folder, out to what other programs run: GGUF (llama.cpp and everything built
// on it), ONNX (onnxruntime) or a Hugging Face folder. The writers are the library's
// (models/gguf.hpp, models/onnx.hpp, models/pretrained.hpp); this program reads the model,
// merges LoRA adapters into it, finds its tokenizer and checks the flags.
//
//   xgrad-export --from run.safetensors --out model.gguf --type q8_0
//   xgrad-export --from hf-folder/ --out model.onnx

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "finite.hpp"
#include "flags.hpp"
#include "language_model.hpp"
#include "tokenizer_files.hpp"
#include "trained_model.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/models/gguf.hpp"
#include "xgrad/models/onnx.hpp"
#include "xgrad/models/pretrained.hpp"
#include "xgrad/nn/lora.hpp"

using namespace xgrad;
using tools::flag;
namespace fs = std::filesystem;

namespace {

struct ExportOptions {
  std::string from, out, format, type, tokenizer;
  bool overwrite = false;
  int threads = 0;
};

// The format --out's name implies: a .gguf or .onnx file (in any case), else a Hugging
// Face folder.
std::string format_of(const std::string& out) {
  std::string extension = fs::path(out).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (extension == ".gguf") return "gguf";
  if (extension == ".onnx") return "onnx";
  return "hf";
}

// xgrad-export's table: one row per flag (tools/common/settings.hpp).
tools::Settings<ExportOptions> settings_table(std::type_identity<ExportOptions>) {
  using namespace tools::setting;
  using O = ExportOptions;
  return {"xgrad-export",
          Text::of("writes a GPT-2 or Llama model (a checkpoint of xgrad-train ", &tools::Config::task,
                   " lm, or a Hugging Face folder) as GGUF for llama.cpp, ONNX for onnxruntime, or a Hugging Face "
                   "folder.\nExample: xgrad-export ",
                   &O::from, " run.safetensors ", &O::out, " model.gguf ", &O::type, " q8_0"),
          {
              path(&O::from, "from")
                  .help("the model: a checkpoint of xgrad-train ", &tools::Config::task, " lm ", &tools::Config::model,
                        " gpt2 or llama (its LoRA adapters merged in), or a Hugging Face "
                        "folder (config.json, model.safetensors, and vocab.json and merges.txt when it has a "
                        "tokenizer)")
                  .required(),
              bind(&O::out, flags::out())
                  .help("the file or folder to write; refused if the file exists or the folder holds a model, unless ",
                        &O::overwrite)
                  .required(),
              choice(&O::format, "format", {"gguf", "onnx", "hf"})
                  .help("gguf: llama.cpp's file, the tokenizer inside; onnx: the forward pass for onnxruntime "
                        "(opset 17, token ids in, logits out); hf: a Hugging Face folder")
                  .fallback([](const O& o) { return format_of(o.out); }, "from ", &O::out,
                            "'s name: .gguf, .onnx, else hf"),
              choice(&O::type, "type", {"f32", "f16", "bf16", "q8_0"})
                  .help("the matrices' type in a GGUF file (norms and biases stay f32; q8_0: blocks of 32 "
                        "values and a scale); onnx and hf write f32")
                  .fallback("f32"),
              bind(&O::tokenizer, flags::tokenizer())
                  .help("the tokenizer to put in a GGUF file (or beside a Hugging Face folder) when ", &O::from,
                        " holds none: a folder holding encoder.json and vocab.bpe (or vocab.json and merges.txt), "
                        "the two files joined by a comma, or a tiktoken rank file")
                  .unused_when(&O::format, {"onnx"}, "an ONNX file carries no tokenizer"),
              toggle(&O::overwrite, "overwrite").help("replace an existing ", &O::out),
              bind(&O::threads, flags::threads()).fallback(0),
          }};
}

struct Source {
  std::unique_ptr<models::PretrainedModel> model;
  std::optional<tools::NamedTokenizer> tokenizer;
  std::vector<std::uint8_t> text_bytes;  // a model of a text's bytes: the bytes its ids stand for
};

// The model --from names, its adapters merged, and its tokenizer if it has one.
Source read_source(const ExportOptions& o) {
  const tools::Flag from = flag(&ExportOptions::from);
  tools::check_input_exists(from.dashed(), o.from);
  Source source;
  if (tools::is_hf_directory(o.from)) {
    try {
      source.model = models::load_pretrained(o.from);
    } catch (const Error& e) {
      throw tools::UsageError(str(from, " ", o.from, ": ", e.what()));
    }
    if (const std::optional<std::string> bad = tools::first_nonfinite(*source.model))
      throw tools::UsageError(str(from, " ", o.from, ": the tensor ", *bad, " holds NaN or infinite values"));
    tools::refuse_half_pair(o.from, from.dashed());
    if (tools::holds_tokenizer_files(o.from)) source.tokenizer = tools::read_tokenizer(o.from, from.dashed());
    source.text_bytes = std::visit([](const auto& c) { return c.token_ids.text_bytes; }, source.model->config());
    if (!source.text_bytes.empty() && source.tokenizer)
      throw tools::UsageError(str(from, " ", o.from, ": its config.json's xgrad_text_bytes says its model learnt ",
                                  "the bytes of a text, but the folder holds a tokenizer (vocab.json, merges.txt)"));
    return source;
  }
  std::error_code error;
  if (fs::is_directory(o.from, error))
    throw tools::UsageError(
        str(from, " ", o.from,
            fs::is_regular_file(fs::path(o.from) / nn::kAdapterConfigFile, error)
                ? str(" holds a LoRA adapter (", nn::kAdapterConfigFile, "), not a model: export the xgrad-train ",
                      "checkpoint it was trained in (its adapters are merged), or its base model")
                : str(" is a folder without config.json: ", from,
                      " is a checkpoint file or a Hugging Face model folder (config.json, model.safetensors)")));
  tools::TrainedModel trained = tools::load_trained_model(from, o.from);
  if (!trained.config.published_model())
    throw tools::UsageError(str(from, " ", o.from, ": a model of xgrad-train ", flag(&tools::Config::model), " ",
                                trained.config.model, ", which no other program runs (train ",
                                flag(&tools::Config::model), " gpt2 or llama to export)"));
  nn::merge_lora(*trained.model);  // no-op without adapters
  source.model.reset(dynamic_cast<models::PretrainedModel*>(trained.model.release()));
  source.tokenizer = std::move(trained.tokens.tokenizer);
  if (!source.tokenizer) source.text_bytes = std::move(trained.tokens.bytes);
  return source;
}

// What a model of a text's bytes cannot be given: its ids are positions in the text's own
// sorted bytes, which no tokenizer's ids are.
std::string text_bytes_model(const ExportOptions& o, const Source& source) {
  return str(flag(&ExportOptions::from), " ", o.from, ": a model of a text's bytes (its ids are the text's ",
             source.text_bytes.size(), " distinct bytes, in order), which no tokenizer's ids are");
}

// --tokenizer fills in a tokenizer --from lacks; it may not replace one.
void take_tokenizer_flag(const ExportOptions& o, Source& source) {
  if (o.tokenizer.empty()) return;
  if (!source.text_bytes.empty())
    throw tools::UsageError(str(text_bytes_model(o, source), ": ", flag(&ExportOptions::tokenizer),
                                " would name other text; export it without one, as ", flag(&ExportOptions::format),
                                " onnx or hf"));
  tools::NamedTokenizer given = tools::read_tokenizer(o.tokenizer, flag(&ExportOptions::tokenizer).dashed());
  if (source.tokenizer && source.tokenizer->tokenizer.identity() != given.tokenizer.identity())
    throw tools::UsageError(str(flag(&ExportOptions::tokenizer), " ", o.tokenizer, ": ", flag(&ExportOptions::from),
                                " ", o.from, " has a tokenizer of its own (", tools::describe(*source.tokenizer),
                                "), and it is another"));
  source.tokenizer = std::move(given);
}

// What cannot be written is refused before any work: an existing --out (unless
// --overwrite), --out naming --from, a type the format does not take.
void check_target(const ExportOptions& o) {
  const tools::Flag out = flag(&ExportOptions::out);
  std::error_code error;
  if (fs::exists(o.out, error) && fs::equivalent(o.out, o.from, error))
    throw tools::UsageError(str(out, " ", o.out, ": is ", flag(&ExportOptions::from), "'s own model"));
  if (o.format == "hf") {
    if (fs::exists(o.out, error) && !fs::is_directory(o.out, error))
      throw tools::UsageError(str(out, " ", o.out, ": is ", xgrad::kind_of_file(o.out), "; ",
                                  flag(&ExportOptions::format), " hf writes a folder"));
    // What a Hugging Face folder's files would replace: a model, or a tokenizer.
    for (const char* name :
         {"config.json", "model.safetensors", "model.safetensors.index.json", "vocab.json", "merges.txt"})
      if (fs::exists(fs::symlink_status(fs::path(o.out) / name, error)) && !o.overwrite)  // a link to nothing too
        throw tools::UsageError(
            str(out, " ", o.out, ": already holds ", name, " (", flag(&ExportOptions::overwrite), " replaces it)"));
  } else {
    if (fs::is_directory(o.out, error)) throw tools::UsageError(str(out, " ", o.out, ": is a folder, not a file"));
    if (fs::exists(o.out, error) && !o.overwrite)
      throw tools::UsageError(str(out, " ", o.out, ": exists (", flag(&ExportOptions::overwrite), " replaces it)"));
  }
  if (o.format != "gguf" && o.type != "f32")
    throw tools::UsageError(str(flag(&ExportOptions::type), " ", o.type, ": ", flag(&ExportOptions::format), " ",
                                o.format, " is written in f32 only"));
}

// The files the export reads: --from (a checkpoint, or its folder's files) and --tokenizer's,
// each with the flag that names it.
std::vector<std::pair<fs::path, tools::Flag>> input_files(const ExportOptions& o, const Source& source) {
  const tools::Flag from = flag(&ExportOptions::from), tokenizer = flag(&ExportOptions::tokenizer);
  std::vector<std::pair<fs::path, tools::Flag>> files;
  std::error_code error;
  if (fs::is_directory(o.from, error)) {
    for (const fs::directory_entry& entry : fs::directory_iterator(o.from, error))
      if (entry.is_regular_file(error)) files.emplace_back(entry.path(), from);
  } else {
    files.emplace_back(o.from, from);
  }
  if (!o.tokenizer.empty() && source.tokenizer) {  // its source lists the files read: "encoder,merges" or one
    std::string names = source.tokenizer->source;
    for (std::size_t comma; (comma = names.find(',')) != std::string::npos; names.erase(0, comma + 1))
      files.emplace_back(names.substr(0, comma), tokenizer);
    files.emplace_back(names, tokenizer);
  }
  return files;
}

// Whether --out's writing replaces `file`: the file itself, or in a Hugging Face folder one
// of the files a save writes (or removes: the shards of an older layout).
bool replaced_by_out(const ExportOptions& o, const fs::path& file) {
  std::error_code error;
  if (o.format != "hf") return fs::equivalent(o.out, file, error);
  static const std::regex written(
      R"(config\.json|model\.safetensors(\.index\.json)?|model-\d+-of-\d+\.safetensors|vocab\.json|merges\.txt)");
  const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
  return fs::equivalent(o.out, folder, error) && std::regex_match(file.filename().string(), written);
}

// No output over an input, even with --overwrite: the export would ruin what it reads.
void refuse_writing_over_inputs(const ExportOptions& o, const Source& source) {
  for (const auto& [file, named_by] : input_files(o, source))
    if (replaced_by_out(o, file))
      throw tools::UsageError(str(flag(&ExportOptions::out), " ", o.out, ": would write over ", file.string(),
                                  ", which ", named_by, " reads"));
}

void write(const ExportOptions& o, const Source& source) {
  const tools::Flag out = flag(&ExportOptions::out);
  try {
    if (o.format == "gguf") {
      if (!source.text_bytes.empty())
        throw tools::UsageError(str(text_bytes_model(o, source), ", and GGUF carries a tokenizer: export it as ",
                                    flag(&ExportOptions::format), " onnx or hf"));
      if (!source.tokenizer)
        throw tools::UsageError(str(flag(&ExportOptions::from), " ", o.from,
                                    ": holds no tokenizer (a Hugging Face folder without vocab.json and merges.txt), "
                                    "and GGUF carries one: give ",
                                    flag(&ExportOptions::tokenizer)));
      models::save_gguf(*source.model, source.tokenizer->tokenizer, o.out,
                        {.tensor_type = models::parse_gguf_tensor_type(o.type), .overwrite = o.overwrite});
    } else if (o.format == "onnx") {
      models::save_onnx(*source.model, o.out, {.overwrite = o.overwrite});
    } else {
      models::save_pretrained(*source.model, o.out,
                              {.overwrite = o.overwrite,
                               .tokenizer = source.tokenizer ? &source.tokenizer->tokenizer : nullptr,
                               .text_bytes = &source.text_bytes});
    }
  } catch (const Error& e) {
    throw tools::UsageError(str(out, " ", o.out, ": ", e.what()));
  }
}

int run(int argc, char** argv) {
  ExportOptions o;
  tools::Given given;
  if (const std::optional<int> printed = tools::settings_of<ExportOptions>().parse(argc, argv, o, given))
    return *printed;
  tools::settings_of<ExportOptions>().check(o);
  tools::settings_of<ExportOptions>().refuse_unused(o, given);
  if (o.threads > 0) set_num_threads(o.threads);
  check_target(o);
  Source source = read_source(o);
  take_tokenizer_flag(o, source);
  refuse_writing_over_inputs(o, source);
  write(o, source);
  const std::string what = o.format == "gguf" ? str("gguf, ", o.type) : o.format;
  std::printf("wrote %s (%s)\n", o.out.c_str(), what.c_str());
  return 0;
}

}  // namespace

// Every error is one line on stderr and exit status 2.
int main(int argc, char** argv) {
  return tools::run_tool("xgrad-export", [&] { return run(argc, argv); });
}
