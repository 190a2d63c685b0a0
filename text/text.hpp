#pragma once
// Everything in text/ at once: byte-level BPE tokenization as GPT-2 defines it.

#include "xgrad/text/byte_symbols.hpp"
#include "xgrad/text/pretokenizer.hpp"
#include "xgrad/text/tokenizer.hpp"
#include "xgrad/text/unicode.hpp"
#include "xgrad/text/utf8.hpp"
#include "xgrad/text/vocabulary_files.hpp"
