#pragma once
// Everything in text/ at once: byte-level BPE tokenization as GPT-2 defines it, vocabulary
// training, token shards and the loader of training windows.

#include "xgrad/text/bpe_trainer.hpp"
#include "xgrad/text/byte_symbols.hpp"
#include "xgrad/text/pretokenizer.hpp"
#include "xgrad/text/token_loader.hpp"
#include "xgrad/text/token_shards.hpp"
#include "xgrad/text/tokenizer.hpp"
#include "xgrad/text/unicode.hpp"
#include "xgrad/text/utf8.hpp"
#include "xgrad/text/vocabulary_files.hpp"
