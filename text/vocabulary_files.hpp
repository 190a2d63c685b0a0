#pragma once
// Vocabulary files in the formats that exist, parsed from their bytes and formatted to
// bytes. Reading and writing the files themselves is the caller's: read_regular_file and
// write_file_atomically (<xgrad/autograd/files.hpp>) do it safely.
//
// GPT-2's pair, the same as Hugging Face's vocab.json + merges.txt:
//   encoder.json  a JSON object from tokens to ids, each token written in GPT-2's byte
//                 alphabet (text/byte_symbols.hpp): {"!": 0, ..., "\u0120the": 262, ...}
//   vocab.bpe     a "#version: 0.2" line, then one merge per line: two tokens in the
//                 alphabet and one space between them ("Ġ t"), each line ending in "\n".
//   They are read as tiktoken reads them: the 256 single bytes have ids 0 to 255 (in any
//   order); the merge on the i-th line after the header (counting from 0) makes the token
//   of rank 256 + i, whatever the pair; every other entry of encoder.json is a special
//   token, its text its key decoded through the alphabet, its id its own ("<|endoftext|>":
//   50256 in GPT-2's). Refused, naming the file (and line) and what is wrong: text that
//   is not JSON or not an object of whole-number ids (a file cut short among them), a
//   token with a character outside the alphabet, a token or an id given twice, any of
//   the 256 single bytes missing or with an id past 255, a bad header or a line that is
//   not two tokens and a space, a last line without its newline (a file cut short), a
//   merge naming a token that is no single byte nor an earlier merge's result, a merge
//   whose result encoder.json lacks, or gives another id than 256 + i, or an earlier
//   line made already; and an entry no merge makes that is two tokens end to end (the
//   merge making it missing: vocab.bpe cut short at a line's end), so a special token
//   may not be two ordinary tokens end to end.
//   Written so: encoder.json in id order, as Python's json.dumps writes it ("\u0120"),
//   vocab.bpe with "#version: 0.2" and, for each rank from 256, the two tokens that BPE
//   over the lower ranks cuts the token into (a tokenizer whose token is not so cut, or
//   whose special token is two tokens end to end, is refused). GPT-2's own files come
//   back byte for byte.
//
// tiktoken's rank file (as tiktoken.load reads and writes it): one line per ordinary
//   token, "<base64 of its bytes> <rank>\n". Special tokens are not in it (tiktoken names
//   them in code): the reader takes them as an argument. Refused, naming the file and
//   line: a line that is not base64 (standard alphabet, padded), a space and a decimal
//   rank; an empty token; a token or a rank given twice; a gap in the ranks (they run 0
//   to n - 1); any of the 256 single bytes missing, or a rank below 256 that is not a
//   single byte; a last line without its newline.

#include <string>
#include <string_view>
#include <vector>

#include "xgrad/text/tokenizer.hpp"

namespace xgrad::text {

// A file's bytes and its name (for the messages).
struct FileBytes {
  std::string_view name;
  std::string_view bytes;
};

Tokenizer parse_gpt2_vocabulary(FileBytes encoder_json, FileBytes vocab_bpe);

struct Gpt2Vocabulary {
  std::string encoder_json;
  std::string vocab_bpe;
};
Gpt2Vocabulary format_gpt2_vocabulary(const Tokenizer& tokenizer);

Tokenizer parse_tiktoken_ranks(FileBytes ranks, std::vector<SpecialToken> special_tokens = {});
std::string format_tiktoken_ranks(const Tokenizer& tokenizer);

}  // namespace xgrad::text
