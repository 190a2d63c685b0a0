#include "xgrad/text/tokenizer.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <initializer_list>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/text/detail/byte_string_map.hpp"
#include "xgrad/text/detail/merge.hpp"
#include "xgrad/text/pretokenizer.hpp"
#include "xgrad/text/utf8.hpp"

namespace xgrad::text {

using detail::ByteStringMap;
static_assert(ByteStringMap::kAbsent == detail::kNoRank, "a byte string the table lacks has no rank");

AllowedSpecial AllowedSpecial::all() {
  AllowedSpecial allowed;
  allowed.all_ = true;
  return allowed;
}

AllowedSpecial AllowedSpecial::none() { return AllowedSpecial(); }

AllowedSpecial::AllowedSpecial(std::initializer_list<std::string_view> texts) {
  for (const std::string_view text : texts) texts_.emplace_back(text);
}

AllowedSpecial::AllowedSpecial(std::vector<std::string> texts) : texts_(std::move(texts)) {}

bool AllowedSpecial::allows(std::string_view special_text) const noexcept {
  return all_ || std::find(texts_.begin(), texts_.end(), special_text) != texts_.end();
}

struct Tokenizer::State {
  explicit State(std::size_t rank_count) : ranks(rank_count) {}
  ByteStringMap ranks;                 // key r: the token of rank r
  std::vector<SpecialToken> specials;  // by id
  std::size_t vocabulary_size = 0;
  std::string identity;
};

namespace {

constexpr const char* kConstructor = "Tokenizer";

void append_u32(std::string& out, std::uint32_t value) {
  for (int shift = 0; shift < 32; shift += 8) out += static_cast<char>((value >> shift) & 0xFF);
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  XGRAD_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) == 1, kConstructor,
              "OpenSSL's SHA-256 failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

// What the identity hashes: the pre-tokenizer's name, then each token as its length and
// bytes, rank by rank, then each special token as its id, length and text, by id.
std::string identity_of(const ByteStringMap& ranks, const std::vector<SpecialToken>& specials) {
  std::string canonical = "xgrad byte-level BPE 1; pieces: gpt2\n";
  append_u32(canonical, static_cast<std::uint32_t>(ranks.size()));
  for (std::uint32_t rank = 0; rank < ranks.size(); ++rank) {
    append_u32(canonical, static_cast<std::uint32_t>(ranks.key(rank).size()));
    canonical.append(ranks.key(rank));
  }
  append_u32(canonical, static_cast<std::uint32_t>(specials.size()));
  for (const SpecialToken& special : specials) {
    append_u32(canonical, special.id);
    append_u32(canonical, static_cast<std::uint32_t>(special.text.size()));
    canonical.append(special.text);
  }
  return sha256_hex(canonical);
}

std::vector<std::string> special_texts(const std::vector<SpecialToken>& specials) {
  std::vector<std::string> texts;
  for (const SpecialToken& special : specials) texts.push_back(quote_bytes(special.text));
  return texts;
}

}  // namespace

Tokenizer::Tokenizer(std::vector<std::string> ranked_tokens, std::vector<SpecialToken> special_tokens) {
  const std::size_t rank_count = ranked_tokens.size();
  XGRAD_CHECK(rank_count >= 256, kConstructor, "the ranks hold ", rank_count,
              " tokens: ranks 0 to 255 must be the 256 single bytes");
  XGRAD_CHECK(rank_count < detail::kNoRank, kConstructor, rank_count, " ranks are more than 32-bit ids can hold");
  auto state = std::make_shared<State>(rank_count);
  for (std::uint32_t rank = 0; rank < rank_count; ++rank) {
    const std::string& token = ranked_tokens[rank];
    XGRAD_CHECK(!token.empty(), kConstructor, "the token of rank ", rank, " is empty");
    XGRAD_CHECK(rank >= 256 || token.size() == 1, kConstructor, "rank ", rank, " is ", quote_bytes(token),
                ": ranks 0 to 255 must be the 256 single bytes (in any order)");
    const std::uint32_t earlier = state->ranks.add(token);
    XGRAD_CHECK(earlier == ByteStringMap::kAbsent, kConstructor, "ranks ", earlier, " and ", rank,
                " are the same token, ", quote_bytes(token));
  }

  std::sort(special_tokens.begin(), special_tokens.end(),
            [](const SpecialToken& a, const SpecialToken& b) { return a.id < b.id; });
  for (std::size_t i = 0; i < special_tokens.size(); ++i) {
    const SpecialToken& special = special_tokens[i];
    XGRAD_CHECK(!special.text.empty(), kConstructor, "special token ", special.id, " has an empty text");
    XGRAD_CHECK(special.id >= rank_count, kConstructor, "special token ", quote_bytes(special.text), " has id ",
                special.id, ", which is rank ", special.id, "'s: special ids start at ", rank_count);
    XGRAD_CHECK(i == 0 || special_tokens[i - 1].id != special.id, kConstructor, "special tokens ",
                quote_bytes(special_tokens[i - 1].text), " and ", quote_bytes(special.text), " both have id ",
                special.id);
    const std::uint32_t rank = state->ranks.find(special.text);
    XGRAD_CHECK(rank == ByteStringMap::kAbsent, kConstructor, "special token ", quote_bytes(special.text),
                " is also the ordinary token of rank ", rank);
    for (std::size_t j = 0; j < i; ++j)
      XGRAD_CHECK(special_tokens[j].text != special.text, kConstructor, "special token ", quote_bytes(special.text),
                  " is given twice, with ids ", special_tokens[j].id, " and ", special.id);
  }
  state->vocabulary_size = special_tokens.empty() ? rank_count : special_tokens.back().id + std::size_t{1};
  state->specials = std::move(special_tokens);
  state->identity = identity_of(state->ranks, state->specials);
  state_ = std::move(state);
}

namespace {

// Texts longer than twice this are cut into stretches of about this much for the pool.
constexpr std::size_t kStretchBytes = std::size_t{1} << 18;

void encode_pieces(const ByteStringMap& ranks, std::string_view text, std::vector<TokenId>& ids) {
  const auto rank_of = [&ranks](std::string_view bytes) { return ranks.find(bytes); };
  detail::MergeScratch scratch;
  Gpt2Pieces pieces(text);
  for (std::string_view piece = pieces.next(); !piece.empty(); piece = pieces.next())
    detail::encode_piece(piece, rank_of, scratch, ids);
}

}  // namespace

void Tokenizer::encode_ordinary(std::string_view text, std::vector<TokenId>& ids) const {
  const ByteStringMap& ranks = state_->ranks;
  if (text.size() < 2 * kStretchBytes) return encode_pieces(ranks, text, ids);
  std::vector<std::size_t> cuts = {0};
  while (cuts.back() < text.size())
    cuts.push_back(gpt2_safe_cut(text, std::min(text.size(), cuts.back() + kStretchBytes)));
  std::vector<std::vector<TokenId>> stretches(cuts.size() - 1);
  constexpr double kWorkPerByte = 10;  // roughly: reading, hashing, merging
  parallel_for(stretches.size(), kWorkPerByte * kStretchBytes, [&](std::size_t i) {
    stretches[i].reserve((cuts[i + 1] - cuts[i]) / 4);
    encode_pieces(ranks, text.substr(cuts[i], cuts[i + 1] - cuts[i]), stretches[i]);
  });
  for (const std::vector<TokenId>& stretch : stretches) ids.insert(ids.end(), stretch.begin(), stretch.end());
}

std::vector<TokenId> Tokenizer::encode_ordinary(std::string_view text) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 4);
  encode_ordinary(text, ids);
  return ids;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, const AllowedSpecial& allowed) const {
  const auto& specials = state_->specials;
  for (const std::string& name : allowed.named())
    XGRAD_CHECK(find_special(name), "encode", "allowed special token ", quote_bytes(name),
                " is no special token of this tokenizer (it has ",
                specials.empty() ? std::string("none") : listed(special_texts(specials)), ")");

  // As tiktoken: any special token not allowed refuses the whole text, before any work.
  const SpecialToken* refused = nullptr;
  std::size_t refused_at = std::string_view::npos;
  for (const SpecialToken& special : specials) {
    if (allowed.allows(special.text)) continue;
    const std::size_t at = text.find(special.text);
    if (at < refused_at) refused = &special, refused_at = at;
  }
  XGRAD_CHECK(refused == nullptr, "encode", "the text holds the special token ", quote_bytes(refused->text),
              " at byte ", refused_at,
              ", which is not allowed (allow it to encode it as its id, or use encode_ordinary to encode it as text)");

  // The allowed ones cut the text; each stretch between them is encoded on its own.
  std::vector<const SpecialToken*> cutters;
  std::vector<std::size_t> next_at;  // where each cutter occurs next
  for (const SpecialToken& special : specials)
    if (allowed.allows(special.text)) {
      cutters.push_back(&special);
      next_at.push_back(text.find(special.text));
    }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 4);
  for (std::size_t pos = 0;;) {
    std::size_t cut = std::string_view::npos, which = 0;
    for (std::size_t k = 0; k < cutters.size(); ++k) {
      if (next_at[k] < pos) next_at[k] = text.find(cutters[k]->text, pos);
      const bool longer = next_at[k] == cut && cutters[k]->text.size() > cutters[which]->text.size();
      if (next_at[k] < cut || longer) cut = next_at[k], which = k;
    }
    if (cut == std::string_view::npos) {
      encode_ordinary(text.substr(pos), ids);
      return ids;
    }
    encode_ordinary(text.substr(pos, cut - pos), ids);
    ids.push_back(cutters[which]->id);
    pos = cut + cutters[which]->text.size();
  }
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
  const State& state = *state_;
  if (id < state.ranks.size()) return state.ranks.key(id);
  const auto special = std::lower_bound(state.specials.begin(), state.specials.end(), id,
                                        [](const SpecialToken& s, TokenId wanted) { return s.id < wanted; });
  if (special != state.specials.end() && special->id == id) return special->text;
  XGRAD_CHECK(id < state.vocabulary_size, "decode", "token id ", id, " is past the vocabulary, whose size is ",
              state.vocabulary_size, " (ids 0 to ", state.vocabulary_size - 1, ")");
  fail("decode", "token id ", id, " is no token: the ordinary ones are 0 to ", state.ranks.size() - 1,
       " and the special ones ", listed(special_texts(state.specials)), " (vocabulary size ", state.vocabulary_size,
       ")");
}

std::string Tokenizer::decode(std::span<const TokenId> ids) const {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (const TokenId id : ids) bytes.append(token_bytes(id));
  return bytes;
}

std::optional<TokenId> Tokenizer::find_token(std::string_view bytes) const noexcept {
  const std::uint32_t rank = state_->ranks.find(bytes);
  if (rank == ByteStringMap::kAbsent) return std::nullopt;
  return rank;
}

std::optional<TokenId> Tokenizer::find_special(std::string_view text) const noexcept {
  for (const SpecialToken& special : state_->specials)
    if (special.text == text) return special.id;
  return std::nullopt;
}

std::size_t Tokenizer::rank_count() const noexcept { return state_->ranks.size(); }
std::size_t Tokenizer::vocabulary_size() const noexcept { return state_->vocabulary_size; }
const std::vector<SpecialToken>& Tokenizer::special_tokens() const noexcept { return state_->specials; }
const std::string& Tokenizer::identity() const noexcept { return state_->identity; }

std::optional<TextBounds> text_bounds(const Tokenizer& tokenizer) {
  const auto first_named = [&](std::initializer_list<std::string_view> names) -> std::optional<TokenId> {
    for (const std::string_view name : names)
      if (const auto id = tokenizer.find_special(name)) return id;
    return std::nullopt;
  };
  const std::vector<SpecialToken>& specials = tokenizer.special_tokens();
  std::optional<TokenId> end =
      first_named({"<|endoftext|>", "</s>", "<|end_of_text|>", "<|eot_id|>", "<|im_end|>", "<eos>"});
  if (!end && specials.size() == 1) end = specials.front().id;
  if (!end) return std::nullopt;
  return TextBounds{first_named({"<s>", "<|begin_of_text|>", "<bos>"}).value_or(*end), *end};
}

}  // namespace xgrad::text
