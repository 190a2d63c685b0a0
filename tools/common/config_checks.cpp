// xgrad-train's checks: every row's range (the table's), then the combinations no single
// row can check, each a named check blamed on one flag (so that a bad value read from a
// checkpoint is said as the checkpoint's).
#include <cstdint>

#include "config.hpp"
#include "xgrad/autograd/error.hpp"

namespace tools {

namespace {

using xgrad::str;

// The ranks and --accum-steps split --batch into equal micro-batches.
void batch_splits_into_micro_batches(const Config& c) {
  if (c.batch % c.micro_batches() != 0)
    throw SettingError(
        flag(&Config::batch),
        str(" ", c.batch, " does not divide into ", c.ranks, " rank", c.ranks > 1 ? "s" : "", " x ",
            flag(&Config::accum_steps), " ", c.accum_steps, " = ", c.micro_batches(), " equal micro-batches"),
        {flag(&Config::accum_steps)});
}

void heads_divide_width(const Config& c) {
  if (c.d_model % c.heads != 0)
    throw SettingError(flag(&Config::heads),
                       str(" ", c.heads, " does not divide ", flag(&Config::d_model), " ", c.d_model));
  // RoPE turns a head's values in pairs.
  if (c.language_model() && c.model == "llama" && (c.d_model / c.heads) % 2 != 0)
    throw SettingError(flag(&Config::heads),
                       str(" ", c.heads, " makes Llama's heads ", flag(&Config::d_model), " ", c.d_model, " / ",
                           c.heads, " = ", c.d_model / c.heads, " wide: RoPE needs an even width"));
}

// The cosine schedule ends at --min-lr, at most --lr; no other schedule has an end rate.
void min_lr_ends_cosine(const Config& c) {
  if (!(c.min_lr >= 0 && c.min_lr <= c.lr))
    throw SettingError(flag(&Config::min_lr),
                       str(" ", c.min_lr, " must lie in [0, ", flag(&Config::lr), " ", c.lr, "]"));
  if (c.min_lr > 0 && c.schedule != "cosine")
    throw SettingError(flag(&Config::min_lr),
                       str(" is the end of the cosine schedule: it needs ", flag(&Config::schedule), " cosine"));
}

void warmup_fits_schedule(const Config& c) {
  if (c.schedule == "cosine" && c.warmup >= c.steps)
    throw SettingError(flag(&Config::warmup), str(" must be below ", flag(&Config::steps), " for cosine"));
  if (c.schedule == "noam" && c.warmup < 1)
    throw SettingError(flag(&Config::schedule), str(" noam needs ", flag(&Config::warmup), " >= 1"));
}

// A run starts from one checkpoint at most; --eval-only needs one.
void one_starting_checkpoint(const Config& c) {
  if (!c.resume.empty() && !c.init_from.empty())
    throw SettingError(flag(&Config::resume), str(" continues a run, ", flag(&Config::init_from),
                                                  " starts a new one from its weights: give one of them"));
  if (c.eval_only && c.resume.empty() && c.init_from.empty())
    throw SettingError(flag(&Config::eval_only), str(" evaluates a checkpoint: give it with ", flag(&Config::resume),
                                                     " or ", flag(&Config::init_from)));
}

// --task lm's models place their positions themselves (--positions is unused). xgrad's
// own (--model gpt, nanoGPT's) has an MLP 4 x --d-model wide and no dropout, while GPT-2
// and Llama sized by the flags take --ff and --dropout. It learns a text or token shards.
void language_model_layout(const Config& c) {
  if (!c.language_model()) return;
  const std::string lm = str(flag(&Config::task), " lm");
  if (!c.published_model()) {
    const std::string gpt = str(lm, " ", flag(&Config::model), " gpt");
    if (c.ff != 0 && c.ff != std::int64_t{4} * c.d_model)
      throw SettingError(flag(&Config::ff), str(" ", c.ff, " is not the width of ", gpt, "'s MLP, 4 x ",
                                                flag(&Config::d_model), " = ", std::int64_t{4} * c.d_model));
    if (c.dropout != 0)
      throw SettingError(flag(&Config::dropout), str(" must be 0: ", gpt, " trains without dropout (nanoGPT's recipe; ",
                                                     flag(&Config::model), " gpt2 and llama take it)"));
  }
  if (!c.text.empty() && !c.data.empty())
    throw SettingError(flag(&Config::text), str(" and ", flag(&Config::data), ": ", lm,
                                                " learns a text's bytes or token shards, give one of them"));
  if (c.text.empty() && c.data.empty())
    throw SettingError(flag(&Config::text), str(" must name the text ", lm, " learns (or give ", flag(&Config::data),
                                                ", a folder of token shards)"));
}

// LoRA adapts the published families' named layers. A given --lora on another model is
// refused as unused; this catches the rank a checkpoint carries (its field then named).
void adapters_on_published_models(const Config& c) {
  if (c.lora > 0 && !c.published_model())
    throw SettingError(flag(&Config::lora),
                       str(" ", c.lora, ": LoRA adapts the published families (", flag(&Config::model),
                           " gpt2 or llama), not ", flag(&Config::model), " ", c.model));
}

// add's sequences hold two numbers of digits in base --vocab.
void add_has_two_numbers(const Config& c) {
  if (c.task == "add" && (c.seq_len < 2 || c.vocab < 2))
    throw SettingError(flag(&Config::task), str(" add needs ", flag(&Config::seq_len), " >= 2 and ",
                                                flag(&Config::vocab), " >= 2 (two numbers, digits in base vocab)"));
}

using Check = void (*)(const Config&);
constexpr Check kCombinations[] = {
    batch_splits_into_micro_batches, heads_divide_width,    min_lr_ends_cosine,           warmup_fits_schedule,
    one_starting_checkpoint,         language_model_layout, adapters_on_published_models, add_has_two_numbers};

}  // namespace

void validate(const Config& config) {
  settings_of<Config>().check(config);
  for (const Check check : kCombinations) check(config);
}

void validate_read(const Config& config, const Metadata& metadata, const Given& given, const std::string& source) {
  try {
    validate(config);
  } catch (const SettingError& e) {
    settings_of<Config>().explain(e, metadata, given, source);
  }
}

}  // namespace tools
