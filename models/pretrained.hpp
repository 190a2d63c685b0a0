#pragma once
// Hugging Face model directories, read and written as transformers' from_pretrained and
// save_pretrained do:
//
//   config.json                          the family and its sizes (models/config.hpp)
//   model.safetensors                    every tensor under its Hugging Face name, or,
//   model-00001-of-0000N.safetensors     for a sharded checkpoint, the tensors split over
//   model.safetensors.index.json         N files, {"metadata": {"total_size": bytes},
//                                         "weight_map": {name: file}}
//   vocab.json, merges.txt               a byte-level BPE tokenizer, as GPT-2's folder holds
//                                        it (text/vocabulary_files.hpp's encoder.json and
//                                        vocab.bpe, under these names), when one is given
//
// Reading takes F32, F64, F16 and BF16 tensors and converts them to the model's dtype (a
// finite F64 value past float32's range, for a float32 model, is an Error; NaN and
// infinities are taken as they are: xgrad's tools refuse them);
// names saved from the base model alone ("h.0.attn.c_attn.weight" for
// "transformer.h.0...") are found, and the buffers a family's files may carry are
// skipped (PretrainedModel::ignored_on_load); a tied model's lm_head.weight beside its
// embedding must equal it. Every other mismatch is an Error naming the file:
// a missing or extra tensor (named), a shape that differs (both shapes), an index naming
// a shard that is not there.
//
//   auto model = models::load_pretrained("gpt2-small/");
//   models::save_pretrained(*model, "out/", {.max_shard_bytes = 2'000'000'000});

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/models/causal_lm.hpp"
#include "xgrad/text/tokenizer.hpp"

namespace xgrad::models {

std::unique_ptr<PretrainedModel> load_pretrained(const std::string& dir, DType dtype = DType::float32);

struct SaveOptions {
  // Shards of at most this many bytes of tensor data each (one tensor larger than that
  // gets a shard of its own); 0: one model.safetensors.
  std::size_t max_shard_bytes = 0;
  // A directory that already holds a model (config.json or model*.safetensors), or the
  // vocab.json and merges.txt this save writes (a link there counts), is an Error unless
  // this is set; then its old files are removed (config.json, model.safetensors, the
  // index and files named as its shards: model-00001-of-00003.safetensors), and the old model's tokenizer files
  // (vocab.json and merges.txt, encoder.json and vocab.bpe) that this save does not write.
  bool overwrite = false;
  // Written beside the model when given (vocab.json and merges.txt).
  const text::Tokenizer* tokenizer = nullptr;
  // A model of a text's bytes, which has no tokenizer: the byte each id stands for (the
  // text's distinct bytes in increasing order), written to config.json as
  // "xgrad_text_bytes" (models/config.hpp) when the model's config does not hold them.
  const std::vector<std::uint8_t>* text_bytes = nullptr;
};
// Writes the model's tensors in its dtype (float32 for training runs). Each file appears
// whole or not at all; config.json is written last; a save that fails removes the files
// it made (a folder where one of them goes is refused before any is written). A model with LoRA adapters attached
// is refused: merge them first (nn::merge_lora) or save them apart.
void save_pretrained(const PretrainedModel& model, const std::string& dir, const SaveOptions& options = {});

}  // namespace xgrad::models
