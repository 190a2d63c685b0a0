// The table's rows at work on the command line: parsing, defaults, range checks and the
// refusal of flags that do nothing (settings.hpp). The checkpoint's record is in
// settings_record.cpp, --help in settings_help.cpp.
#include "settings.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "numbers.hpp"
#include "xgrad/autograd/blas.hpp"
#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/autograd/version.hpp"

namespace tools {

namespace {

// A real number in its shortest exact form ("0.1"), or `record` as it is.
std::string shortest(const std::string& record) {
  const std::optional<double> value = parse_real(record);
  if (!value) return record;
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, *value);
  return error == std::errc() ? std::string(text, end) : record;
}

template <class Int>
struct WholeType final : ValueType {
  CLI::Option* add_option(CLI::App& app, const std::string& name, void* value) const override {
    return app.add_option(name, *static_cast<Int*>(value))->transform(whole_number<Int>());
  }
  std::string record(const void* value) const override { return std::to_string(*static_cast<const Int*>(value)); }
  bool read(const std::string& text, void* value) const override {
    const std::optional<Int> parsed = parse_whole<Int>(text);
    if (parsed) *static_cast<Int*>(value) = *parsed;
    return parsed.has_value();
  }
  std::optional<double> number(const void* value) const override {
    return static_cast<double>(*static_cast<const Int*>(value));
  }
  const char* expected() const override { return "a whole number in range"; }
};

// Reals: T is double, or std::optional<double> for a setting that may be unset.
template <class T>
struct RealType final : ValueType {
  CLI::Option* add_option(CLI::App& app, const std::string& name, void* value) const override {
    return app.add_option(name, *static_cast<T*>(value))->transform(real_number());
  }
  std::string record(const void* value) const override {
    const T& v = *static_cast<const T*>(value);
    if constexpr (std::is_same_v<T, double>)
      return exact_text(v);
    else
      return v ? exact_text(*v) : std::string();
  }
  bool read(const std::string& text, void* value) const override {
    const std::optional<double> parsed = parse_real(text);
    if (parsed) *static_cast<T*>(value) = *parsed;
    return parsed.has_value();
  }
  std::string readable(const std::string& record) const override { return shortest(record); }
  std::optional<double> number(const void* value) const override { return *static_cast<const T*>(value); }
  const char* expected() const override { return "a number"; }
};

struct TextType final : ValueType {
  CLI::Option* add_option(CLI::App& app, const std::string& name, void* value) const override {
    return app.add_option(name, *static_cast<std::string*>(value));
  }
  std::string record(const void* value) const override { return *static_cast<const std::string*>(value); }
  bool read(const std::string& text, void* value) const override {
    *static_cast<std::string*>(value) = text;
    return true;
  }
  std::optional<double> number(const void*) const override { return std::nullopt; }
  const char* expected() const override { return "a text"; }
};

struct ToggleType final : ValueType {
  CLI::Option* add_option(CLI::App& app, const std::string& name, void* value) const override {
    return app.add_flag(name, *static_cast<bool*>(value));
  }
  std::string record(const void* value) const override { return *static_cast<const bool*>(value) ? "true" : "false"; }
  bool read(const std::string& text, void* value) const override {
    if (text != "true" && text != "false") return false;
    *static_cast<bool*>(value) = text == "true";
    return true;
  }
  std::optional<double> number(const void*) const override { return std::nullopt; }
  const char* expected() const override { return "true or false"; }
};

// A bound as people read it: "1000000", "0.001".
std::string bound_text(double bound) {
  if (bound == std::floor(bound) && std::abs(bound) < 1e15) return std::to_string(static_cast<std::int64_t>(bound));
  return shortest(exact_text(bound));
}

// The row's value against its bounds; `said` is the value as the message shows it.
void check_bounds(const RowData& row, double v, const std::string& said) {
  const Bounds& b = row.bounds;
  const std::optional<double> most = b.most_now ? std::optional<double>(b.most_now()) : b.most;
  const bool most_open = !b.most_now && b.most_open;
  // The note goes with the upper bound when there is one ("at most 8 (4 per CPU ...)").
  const auto fail = [&](const std::string& what, bool upper) {
    throw SettingError(row.flag, " " + what + (upper || !most ? b.note : "") + ", got " + said);
  };
  const bool real = row.shape == Shape::real;
  if (real && b.least && most) {  // an interval: NaN and infinities lie outside it too
    if (!((b.least_open ? v > *b.least : v >= *b.least) && (most_open ? v < *most : v <= *most)))
      fail(xgrad::str("must lie in ", b.least_open ? "(" : "[", bound_text(*b.least), ", ", bound_text(*most),
                      most_open ? ")" : "]"),
           true);
    return;
  }
  if (real && !std::isfinite(v)) throw SettingError(row.flag, " must be a finite number, got " + said);
  if (b.least && b.least_open && !(v > *b.least))
    fail(*b.least == 0 ? "must be positive" : "must be above " + bound_text(*b.least), false);
  if (b.least && !b.least_open && !(v >= *b.least))
    fail(*b.least == 0 ? "cannot be negative" : "must be at least " + bound_text(*b.least), false);
  if (most && most_open && !(v < *most)) fail("must be below " + bound_text(*most), true);
  if (most && !most_open && !(v <= *most)) fail("must be at most " + bound_text(*most), true);
}

}  // namespace

template <>
const ValueType& value_type<int>() {
  static const WholeType<int> type;
  return type;
}
template <>
const ValueType& value_type<std::int64_t>() {
  static const WholeType<std::int64_t> type;
  return type;
}
// std::size_t is std::uint64_t where the tools build (LP64).
static_assert(std::is_same_v<std::size_t, std::uint64_t>);
template <>
const ValueType& value_type<std::uint64_t>() {
  static const WholeType<std::uint64_t> type;
  return type;
}
template <>
const ValueType& value_type<double>() {
  static const RealType<double> type;
  return type;
}
template <>
const ValueType& value_type<std::optional<double>>() {
  static const RealType<std::optional<double>> type;
  return type;
}
template <>
const ValueType& value_type<std::string>() {
  static const TextType type;
  return type;
}
template <>
const ValueType& value_type<bool>() {
  static const ToggleType type;
  return type;
}

std::string Text::shown() const {
  std::string text;
  for (const Part& part : parts_) text += part.flag ? part.flag().dashed() : part.words;
  return text;
}

Declaration::Declaration(std::string name, Shape shape, std::vector<std::string> choices)
    : RowBuilder(std::move(name), shape) {
  data_->choices = std::move(choices);
}

SettingsCore::SettingsCore(std::string program, Text about, std::type_index owner,
                           std::vector<std::shared_ptr<const RowData>> rows, std::vector<RecipeRule> recipes)
    : program_(std::move(program)),
      about_(std::move(about)),
      owner_(owner),
      rows_(std::move(rows)),
      recipes_(std::move(recipes)) {
  for (const auto& row : rows_) {
    if (row->field.owner != owner_) throw std::logic_error(row->flag.dashed() + ": a field of another program");
    for (const RowData::Fallback& fallback : row->fallbacks)
      if (!fallback.recipe.empty() && std::none_of(recipes_.begin(), recipes_.end(), [&](const RecipeRule& recipe) {
            return recipe.name == fallback.recipe;
          }))
        throw std::logic_error(row->flag.dashed() + ": no recipe " + fallback.recipe + " in the table");
  }
}

const RowData* SettingsCore::find(const FieldId& field) const {
  for (const auto& row : rows_)
    if (row->field == field) return row.get();
  return nullptr;
}

const RowData* SettingsCore::find(const std::string& name) const {
  for (const auto& row : rows_)
    if (row->flag.name() == name) return row.get();
  return nullptr;
}

const RowData& SettingsCore::row(const FieldId& field) const {
  if (const RowData* found = find(field)) return *found;
  throw std::logic_error(program_ + ": a field with no row in its table");
}

std::string SettingsCore::value(const RowData& row, const void* settings) const {
  return row.type->record(row.field_in(settings));
}

std::optional<int> SettingsCore::parse(int argc, char** argv, void* settings, Given& given) const {
  CLI::App app{"", program_};
  app.formatter(help_formatter());  // --help is the table's; --version names the kernels in use
  app.set_version_flag("--version", xgrad::str(program_, " ", xgrad::version(), " (", xgrad::blas_summary(),
                                               "; bf16 products: ", xgrad::bf16_summary(), ")"));
  std::vector<std::pair<const RowData*, CLI::Option*>> options;
  for (const auto& row : rows_) {
    CLI::Option* option = row->type->add_option(app, row->flag.dashed(), row->field_in(settings));
    if (row->shape == Shape::choice) option->check(CLI::IsMember(row->choices));
    if (row->required) option->required();
    options.emplace_back(row.get(), option);
  }
  if (const std::optional<int> printed = parse_flags(app, argc, argv)) return printed;
  for (const auto& [row, option] : options) {
    if (option->count() == 0) continue;
    given.insert(row->flag.name());
    if (row->shape == Shape::path && value(*row, settings).empty())
      throw SettingError(row->flag, " needs a file name, got \"\"");
  }
  apply_defaults(settings, given);
  return std::nullopt;
}

void SettingsCore::apply_defaults(void* settings, const Given& kept) const {
  for (const auto& row : rows_) {
    if (kept.count(row->flag.name())) continue;
    // The recipe as the rows before this one left it (the task is the first row).
    std::string recipe;
    for (const RecipeRule& rule : recipes_)
      if (rule.applies(settings)) {
        recipe = rule.name;
        break;
      }
    const RowData::Fallback* chosen = nullptr;
    for (const RowData::Fallback& fallback : row->fallbacks)
      if (fallback.recipe == recipe || (fallback.recipe.empty() && !chosen)) chosen = &fallback;
    if (chosen) chosen->apply(settings);
  }
}

void SettingsCore::check(const void* settings) const {
  for (const auto& row : rows_) {
    const void* field = row->field_in(settings);
    if (row->shape == Shape::choice) {
      const std::string name = value(*row, settings);
      if (std::find(row->choices.begin(), row->choices.end(), name) == row->choices.end())
        throw SettingError(row->flag, " " + name + " is not one of " + xgrad::listed(row->choices));
    } else if (const std::optional<double> number = row->type->number(field)) {
      check_bounds(*row, *number, row->shape == Shape::real ? xgrad::str(*number) : value(*row, settings));
    }
  }
}

const RowData::Unused* SettingsCore::unused_by(const RowData& row,
                                               const std::function<std::string(const RowData&)>& held) const {
  for (const RowData::Unused& unused : row.unused) {
    const std::string value = held(this->row(unused.target));
    const bool listed = std::find(unused.values.begin(), unused.values.end(), value) != unused.values.end();
    if (listed == unused.when_one_of) return &unused;
  }
  return nullptr;
}

void SettingsCore::refuse_unused(const void* settings, const Given& given) const {
  const auto held = [&](const RowData& target) { return value(target, settings); };
  for (const auto& row : rows_) {
    if (!given.count(row->flag.name())) continue;
    const RowData::Unused* unused = unused_by(*row, held);
    if (!unused) continue;
    const RowData& target = this->row(unused->target);
    const std::string value = held(target);
    const std::string which = target.shape == Shape::toggle ? target.flag.dashed()
                              : value.empty()               ? "a run without " + target.flag.dashed()
                                                            : target.flag.dashed() + " " + value;
    throw SettingError(row->flag, " is not used by " + which + " (" + unused->reason.shown() + ")");
  }
}

}  // namespace tools
