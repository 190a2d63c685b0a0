// --task lm's data as a run opens it: a text's bytes (--text) or token shards with their
// tokenizer (--data, --tokenizer), checked against the checkpoint or Hugging Face folder a
// run starts from, so that a run never mixes vocabularies or tokenizers.

#include <filesystem>

#include "language_model.hpp"
#include "trainer.hpp"
#include "workload.hpp"
#include "xgrad/autograd/error.hpp"
#include "xgrad/models/config.hpp"

namespace tools {

using namespace xgrad;

namespace {

// Whether --init-from is a Hugging Face folder with a tokenizer (vocab.json and merges.txt,
// as --save-hf writes beside a model of token shards).
bool hf_folder_with_tokenizer(const Config& c) {
  return is_hf_directory(c.init_from) && holds_tokenizer_files(c.init_from);
}

// The bytes a Hugging Face folder's model of a text's bytes numbers (config.json's
// xgrad_text_bytes, which --save-hf writes); empty for any other folder, and for none.
std::vector<std::uint8_t> hf_folder_text_bytes(const Config& c) {
  if (!is_hf_directory(c.init_from)) return {};
  try {
    const models::ModelConfig config =
        models::read_model_config((std::filesystem::path(c.init_from) / "config.json").string());
    return std::visit([](const auto& m) { return m.token_ids.text_bytes; }, config);
  } catch (const Error& e) {
    throw UsageError(str(flag(&Config::init_from), ": ", e.what()));
  }
}

// The checkpoint's model (or the Hugging Face folder's) must have learnt the same kind of
// tokens.
void check_same_kind(const Config& c, const Start& start, bool shards) {
  if (shards && !hf_folder_text_bytes(c).empty())
    throw UsageError(str(flag(&Config::init_from), " ", c.init_from,
                         ": its model learnt the bytes of a text (its config.json's xgrad_text_bytes), not token ",
                         "shards: give it a text of the same characters with ", flag(&Config::text)));
  if (!shards && hf_folder_with_tokenizer(c))
    throw UsageError(
        str(flag(&Config::init_from), " ", c.init_from,
            ": its model learnt the token ids of its tokenizer (vocab.json, merges.txt), not the bytes of ",
            "a text: give it token shards with ", flag(&Config::data)));
  if (!start.flag) return;
  const Metadata& m = start.contents.metadata;
  if (shards && m.count("lm.vocabulary"))
    throw UsageError(str(start.source(), ": the checkpoint learnt the bytes of a text (", flag(&Config::text),
                         "), not token shards: give it a text, or start a new run on ", flag(&Config::data)));
  if (!shards && m.count("lm.tokenizer"))
    throw UsageError(str(start.source(), ": the checkpoint learnt token shards (", flag(&Config::data),
                         "), not the bytes of a text: give it ", flag(&Config::data), " and its tokenizer"));
}

std::shared_ptr<const LanguageData> open_text(const Config& c, const Start& start) {
  const std::string text = str(flag(&Config::text), " ", c.text);
  std::shared_ptr<const TextCorpus> corpus;
  try {
    corpus = std::make_shared<const TextCorpus>(c.text, text);
  } catch (const Error& e) {
    throw UsageError(str(
        e.what(), c.text == XGRAD_DEFAULT_TEXT ? str(" (./run prepares it; or give ", flag(&Config::text), ")") : ""));
  }
  if (start.flag) {
    const auto it = start.contents.metadata.find("lm.vocabulary");
    if (it == start.contents.metadata.end())
      throw UsageError(str(start.source(), ": the checkpoint has no lm.vocabulary"));
    if (it->second != vocabulary_to_hex(corpus->vocabulary()))
      throw UsageError(str(text, ": its ", corpus->vocabulary().size(),
                           " distinct bytes are not the vocabulary the checkpoint was trained on (",
                           it->second.size() / 2, " bytes): give the same text, or one with the same characters"));
  }
  if (const std::vector<std::uint8_t> learnt = hf_folder_text_bytes(c);
      !learnt.empty() && learnt != corpus->vocabulary())
    throw UsageError(str(text, ": its ", corpus->vocabulary().size(), " distinct bytes are not the ", learnt.size(),
                         " its model learnt (", flag(&Config::init_from), " ", c.init_from,
                         "'s config.json, xgrad_text_bytes): give a text of the same characters"));
  for (const Split split : {Split::train, Split::validation}) {
    const std::size_t bytes = corpus->split_end(split) - corpus->split_begin(split);
    if (bytes < static_cast<std::size_t>(c.seq_len) + 1)
      throw UsageError(str(text, ": its ", split == Split::train ? "training" : "validation", " split (",
                           split == Split::train ? "the first 90%" : "the last 10%", ") holds ", bytes,
                           " bytes, fewer than one window of ", flag(&Config::seq_len),
                           " + 1 = ", std::int64_t{c.seq_len} + 1));
  }
  return make_char_data(corpus, static_cast<std::size_t>(c.seq_len));
}

// The tokenizer of the shards: --tokenizer's, else the folder's own pair, else (resuming
// or fine-tuning) the checkpoint's or the Hugging Face folder's. It must be the folder's
// (when the folder holds a pair, as xgrad-tokenize writes) and the one the model learnt
// with.
NamedTokenizer open_tokenizer(const Config& c, const Start& start) {
  const bool named_by_folder = c.tokenizer == c.data;
  const std::string what = named_by_folder ? str(flag(&Config::data), " ", c.data, "'s tokenizer")
                                           : str(flag(&Config::tokenizer), " ", c.tokenizer);
  std::optional<NamedTokenizer> trained;
  std::string learnt_by = "the checkpoint";
  if (start.flag) {
    trained = tokenizer_from_metadata(start.contents.metadata, start.source());
    if (!trained) throw UsageError(str(start.source(), ": the checkpoint records no tokenizer (lm.tokenizer)"));
  } else if (is_hf_directory(c.init_from)) {
    refuse_half_pair(c.init_from, flag(&Config::init_from).dashed());
    if (holds_tokenizer_files(c.init_from)) {
      trained = read_tokenizer(c.init_from, flag(&Config::init_from).dashed());
      learnt_by = str(flag(&Config::init_from), " ", c.init_from, "'s model");
    }
  }
  if (named_by_folder) refuse_half_pair(c.data, flag(&Config::data).dashed());
  const bool folder_has_pair = holds_tokenizer_files(c.data);
  if (named_by_folder && !folder_has_pair) {
    if (trained) return *trained;
    throw UsageError(str(flag(&Config::data), " ", c.data, ": holds no encoder.json and vocab.bpe: name the shards' ",
                         "tokenizer with ", flag(&Config::tokenizer)));
  }
  NamedTokenizer named =
      read_tokenizer(c.tokenizer, (named_by_folder ? flag(&Config::data) : flag(&Config::tokenizer)).dashed());
  if (!named_by_folder && folder_has_pair) {
    const NamedTokenizer folders = read_tokenizer(c.data, flag(&Config::data).dashed());
    if (folders.tokenizer.identity() != named.tokenizer.identity())
      throw UsageError(str(what, ": tokenizer ", describe(named), " is not the one that made ", flag(&Config::data),
                           "'s shards, ", describe(folders)));
  }
  if (trained && trained->tokenizer.identity() != named.tokenizer.identity())
    throw UsageError(str(what, ": tokenizer ", describe(named), " is not the one ", learnt_by, " learnt with, ",
                         describe(*trained)));
  check_trainable(named, what);
  return named;
}

std::shared_ptr<const LanguageData> open_shards(const Config& c, const Start& start) {
  const std::string what = str(flag(&Config::data), " ", c.data);
  check_input_exists(flag(&Config::data).dashed(), c.data);
  const ShardFolder shards = find_shards(c.data, what);
  NamedTokenizer tokenizer = open_tokenizer(c, start);
  try {
    return make_shard_data(shards, std::move(tokenizer), static_cast<std::size_t>(c.seq_len));
  } catch (const Error& e) {
    throw UsageError(str(what, ": ", e.what()));
  }
}

// A resumed run goes on with the data it learnt (the same bytes under any path): another
// text with the same characters, or shards edited in place, would go on silently on
// other data. An evaluation may take any data; a checkpoint from before lm.data, too.
void check_same_data(const Config& c, const Start& start, const LanguageData& data) {
  if (!start.resume || c.eval_only) return;
  const auto recorded = start.contents.metadata.find("lm.data");
  if (recorded == start.contents.metadata.end()) return;
  Metadata now;
  data.add_metadata(now);
  if (now.at("lm.data") == recorded->second) return;
  const bool shards = !c.data.empty();
  throw UsageError(
      str(shards ? str(flag(&Config::data), " ", c.data, "'s shards") : str(flag(&Config::text), " ", c.text),
          ": not the data the checkpoint was trained on (", now.at("lm.data"), "; the checkpoint's: ", recorded->second,
          "): give it the same bytes, or start a new run from the checkpoint with ", flag(&Config::init_from)));
}

}  // namespace

std::shared_ptr<const LanguageData> open_language_data(Config& c, const Start& start) {
  const bool shards = !c.data.empty();
  check_same_kind(c, start, shards);
  std::shared_ptr<const LanguageData> data = shards ? open_shards(c, start) : open_text(c, start);
  check_same_data(c, start, *data);
  c.vocab = static_cast<int>(data->vocabulary_size());
  return data;
}

}  // namespace tools
