#pragma once
// What xgrad-train shows: the live progress line, sample predictions, and attention maps
// in the terminal or as a PNG.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "flag.hpp"
#include "xgrad/autograd/tensor.hpp"

namespace tools {

// One line rewritten in place on a terminal (nothing when disabled), cut to its width:
// the step, the last loss, tokens/s, steps/s and the time left to step `total` at that
// rate (a target may end the run sooner).
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  void show(std::int64_t step, int total, double loss, double tokens_per_second, double steps_per_second);
  void clear();  // before printing a normal line

 private:
  bool enabled_;
  bool shown_ = false;
};

// Tokens as text: one character each (0-9, a-z) when vocab <= 36, else numbers.
std::string token_text(const std::vector<std::int64_t>& tokens, std::size_t vocab);

// Input, prediction and target of one row; wrong predictions are marked with ^ below.
void print_sample(std::ostream& os, const std::vector<std::int64_t>& input, const std::vector<std::int64_t>& prediction,
                  const std::vector<std::int64_t>& target, std::size_t vocab, std::int64_t ignore);

// maps [H, L, L] (query rows, key columns): each head as a grid of shaded cells, every
// row scaled to its own maximum. `tokens` label the rows and columns.
void print_attention(std::ostream& os, const xgrad::Tensor& maps, const std::vector<std::int64_t>& tokens,
                     std::size_t vocab);
// The same maps as a PNG a reader understands on its own: a title, one panel per head
// with its number, axis names (queries down, keys across), `labels` (one per position)
// on both axes when the cells are big enough, and a colour scale (white 0, dark blue the
// row's maximum). `label_note` explains the labels when they need it.
void write_attention_png(const std::string& path, const Flag& flag, const xgrad::Tensor& maps,
                         const std::vector<std::string>& labels, const std::string& title,
                         const std::string& label_note = "");

}  // namespace tools
