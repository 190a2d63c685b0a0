#pragma once
// One table of settings per program. Each flag is one row, declared once: its name, what
// it takes (a whole number, a real number, a name among choices, a text, a path, a
// switch), the range it allows, its help, its default (and each recipe's), whether a
// checkpoint keeps it, and the options that make it meaningless. From the rows come the
// command line (CLI11), --help, the range checks, the refusal of flags that do nothing,
// and the checkpoint's settings record with its agreement checks on resume.
//
//   struct DemoOptions { int threads = 0; std::string checkpoint; };
//   Settings<DemoOptions> settings_table(std::type_identity<DemoOptions>) {
//     return {"xgrad-demo", Text::of("does one thing"), {
//         setting::path(&DemoOptions::checkpoint, "checkpoint").help("the model").required(),
//         setting::bind(&DemoOptions::threads, flags::threads()).fallback(0)}};
//   }
//
// A program's table is made from its settings_table() (found beside its struct) the first
// time settings_of<DemoOptions>() is called, and lives as long as the program.
//
// Messages and other texts name a flag through its field, never by writing its name
// again: str(flag(&Options::threads), " ...") starts with "--threads", Text::of("see ",
// &Options::threads) says "see --threads". Flags that several programs take are declared
// once in flags.hpp and bound by each program's table.
//
// A row's kind says what a checkpoint does with it: a model setting is kept
// ("config.<name>") and must agree on resume and on fine-tuning; a learning setting is
// kept and must agree on resume; a run setting is kept ("run.<name>") and carried on on
// resume unless given again; a local one is not kept.

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "flag.hpp"

namespace CLI {
class App;
class Option;
class FormatterBase;
}  // namespace CLI

namespace tools {

using Metadata = std::map<std::string, std::string>;  // as nn::Metadata, a checkpoint's text entries
using Given = std::set<std::string>;                  // flags by name: those given on the command line

// A setting that cannot be used, blamed on one flag: "<flag><rest>", e.g. "--heads" and
// " 3 does not divide --d-model 32". A setting read from a checkpoint is then said as the
// checkpoint's (Settings::explain), and `with` the flags given beside it that it meets
// ("the checkpoint's config.batch = '4' cannot be used with --accum-steps: ...").
struct SettingError : UsageError {
  SettingError(const Flag& flag, const std::string& rest, std::vector<Flag> with = {})
      : UsageError(flag.dashed() + rest), flag(flag), rest(rest), with(std::move(with)) {}
  Flag flag;
  std::string rest;
  std::vector<Flag> with;
};

template <class S>
class Settings;
class Declaration;
// Program S's table: made on first use from settings_table(std::type_identity<S>), which
// each program defines beside its settings struct (found there by argument-dependent
// lookup). Made on first use, so that a row's texts may name flags of any table.
template <class S>
const Settings<S>& settings_of() {
  static const Settings<S> table = settings_table(std::type_identity<S>{});
  return table;
}

// Which field of a program's settings struct a row is bound to, by its offset in the
// struct: how rows find each other (flag(&Config::warmup)). Only compared, never used to
// reach the field (RowData::field_in does that).
struct FieldId {
  std::type_index owner = typeid(void);
  std::size_t offset = 0;
  bool operator==(const FieldId&) const = default;
};
template <class S, class T>
FieldId field_id(T S::*member) {
  static const S probe{};
  const auto* base = reinterpret_cast<const char*>(&probe);
  return {typeid(S), static_cast<std::size_t>(reinterpret_cast<const char*>(&(probe.*member)) - base)};
}

// The flag a field is bound to in its program's table: flag(&Config::warmup) streams as
// "--warmup".
template <class S, class T>
Flag flag(T S::*field) {
  return settings_of<S>().flag(field);
}

// Words for people (help, reasons, defaults), with flags named by field or by Flag:
// Text::of("cosine: the rate reached at ", &Config::steps). Fields are named when shown,
// so that texts may refer to rows declared after them, or to another program's.
class Text {
 public:
  template <class... Parts>
  static Text of(const Parts&... parts) {
    Text text;
    (text.add(parts), ...);
    return text;
  }
  bool empty() const { return parts_.empty(); }
  std::string shown() const;

 private:
  void add(const char* words) { parts_.push_back({words, {}}); }
  void add(const std::string& words) { parts_.push_back({words, {}}); }
  void add(const Flag& flag) { parts_.push_back({flag.dashed(), {}}); }
  void add(const Text& text) { parts_.insert(parts_.end(), text.parts_.begin(), text.parts_.end()); }
  void add(const Declaration& (*declared)());  // a flag of flags.hpp, named when shown
  template <class S, class T>
  void add(T S::*field) {
    parts_.push_back({{}, [field] { return tools::flag(field); }});
  }
  struct Part {
    std::string words;
    std::function<Flag()> flag;  // set: the part is this flag
  };
  std::vector<Part> parts_;
};

// What a flag takes, as --help shows it: N, X, NAME, TEXT, PATH, or nothing.
enum class Shape { whole, real, choice, text, path, toggle };
// What a checkpoint does with a setting (see the top of this file).
enum class Kind { local, model, learning, run };

// How a value of one C++ type is read and written: on the command line (CLI11, whole and
// real numbers strictly), in a checkpoint (reals exactly), and for people. Defined for
// int, std::int64_t, std::uint64_t (std::size_t), double, std::optional<double>,
// std::string and bool.
struct ValueType {
  virtual ~ValueType() = default;
  virtual CLI::Option* add_option(CLI::App& app, const std::string& name, void* value) const = 0;
  virtual std::string record(const void* value) const = 0;            // exact; "" when unset
  virtual bool read(const std::string& text, void* value) const = 0;  // strictly
  virtual std::string readable(const std::string& record) const { return record; }
  virtual std::optional<double> number(const void* value) const = 0;
  virtual const char* expected() const = 0;  // what read() takes: "a whole number in range"
};
template <class T>
const ValueType& value_type();

// The range a number may take; `note` follows it in messages (" seconds").
struct Bounds {
  std::optional<double> least, most;
  bool least_open = false, most_open = false;
  std::function<double()> most_now;  // a bound known when the program runs (cores)
  std::string note;
};

// Everything a row declares, whatever its type.
struct RowData {
  Flag flag;
  Shape shape = Shape::text;
  Text help;
  Bounds bounds;
  std::vector<std::string> choices;
  bool required = false;
  // Bound to a field:
  const ValueType* type = nullptr;
  FieldId field;
  std::function<void*(void* settings)> locate;  // the field in a settings struct of the program's
  void* field_in(void* settings) const { return locate(settings); }
  const void* field_in(const void* settings) const { return locate(const_cast<void*>(settings)); }
  Kind kind = Kind::local;
  struct Fallback {
    std::string recipe;  // "": every recipe without its own
    std::function<void(void* settings)> apply;
    Text shown;
  };
  std::vector<Fallback> fallbacks;
  // Meaningless when the target's value is (or, `when_one_of` false, is not) one of `values`.
  struct Unused {
    FieldId target;
    std::vector<std::string> values;
    bool when_one_of = true;
    Text reason;
  };
  std::vector<Unused> unused;
  // How a checkpoint keeps it, when not as the field's own value.
  struct Record {
    std::string name;  // of the key: "micro-batches"
    const ValueType* type = nullptr;
    std::function<std::string(const void* settings)> write;
    std::function<bool(const std::string& text, void* settings)> read;
  };
  std::optional<Record> record;
  std::optional<std::string> absent;  // what a checkpoint without it held (written before it existed)
};

// The builder methods every row has, declared or bound (Self: the row's own type).
template <class Self>
class RowBuilder {
 public:
  template <class... Parts>
  Self&& help(const Parts&... parts) && {
    data_->help = Text::of(parts...);
    return self();
  }
  Self&& at_least(double least) && {
    data_->bounds.least = least, data_->bounds.least_open = false;
    return self();
  }
  Self&& above(double least) && {
    data_->bounds.least = least, data_->bounds.least_open = true;
    return self();
  }
  Self&& at_most(double most) && {
    data_->bounds.most = most, data_->bounds.most_open = false;
    return self();
  }
  Self&& below(double most) && {
    data_->bounds.most = most, data_->bounds.most_open = true;
    return self();
  }
  Self&& at_most_now(std::function<double()> most) && {
    data_->bounds.most_now = std::move(most);
    return self();
  }
  Self&& range_note(std::string note) && {
    data_->bounds.note = std::move(note);
    return self();
  }
  Self&& required() && {
    data_->required = true;
    return self();
  }

 protected:
  RowBuilder(std::string name, Shape shape) : data_(std::make_shared<RowData>()) {
    data_->flag = Flag(std::move(name));
    data_->shape = shape;
  }
  explicit RowBuilder(std::shared_ptr<RowData> data) : data_(std::move(data)) {}
  Self&& self() { return std::move(static_cast<Self&>(*this)); }
  std::shared_ptr<RowData> data_;
};

// A flag declared for several programs (flags.hpp), not yet bound to a field.
class Declaration : public RowBuilder<Declaration> {
 public:
  Declaration(std::string name, Shape shape, std::vector<std::string> choices = {});
  const Flag& flag() const { return data_->flag; }
  std::shared_ptr<RowData> copy() const { return std::make_shared<RowData>(*data_); }
};

inline void Text::add(const Declaration& (*declared)()) {
  parts_.push_back({{}, [declared] { return declared().flag(); }});
}

// A recipe: defaults of its own for the settings of a kind of run (--task lm's).
template <class S>
struct Recipe {
  std::string name;
  std::function<bool(const S&)> applies;
};

// A row of program S's table, bound to the field of type T that holds its value.
template <class S, class T>
class Row : public RowBuilder<Row<S, T>> {
  using Base = RowBuilder<Row<S, T>>;

 public:
  Row(T S::*field, std::string name, Shape shape, std::vector<std::string> choices = {})
      : Base(std::move(name), shape) {
    this->data_->choices = std::move(choices);
    bind_to(field);
  }
  Row(T S::*field, const Declaration& declared) : Base(declared.copy()) { bind_to(field); }

  Row&& model() && { return kind(Kind::model); }
  Row&& learning() && { return kind(Kind::learning); }
  Row&& run() && { return kind(Kind::run); }

  // The default: a value, or one made from the settings before it in the table.
  Row&& fallback(T value) && { return add_fallback("", constant(value), shown(value)); }
  template <class... Parts>
  Row&& fallback(std::function<T(const S&)> made, const Parts&... shown_as) && {
    return add_fallback("", std::move(made), Text::of(shown_as...));
  }
  // A recipe's default.
  Row&& with(const Recipe<S>& recipe, T value) && { return add_fallback(recipe.name, constant(value), shown(value)); }
  template <class... Parts>
  Row&& with(const Recipe<S>& recipe, std::function<T(const S&)> made, const Parts&... shown_as) && {
    return add_fallback(recipe.name, std::move(made), Text::of(shown_as...));
  }

  // Meaningless (and refused when given) while `field` holds one of `values`, or none.
  template <class U, class... Parts>
  Row&& unused_when(U S::*field, std::vector<std::string> values, const Parts&... reason) && {
    this->data_->unused.push_back({field_id(field), std::move(values), true, Text::of(reason...)});
    return std::move(*this);
  }
  template <class U, class... Parts>
  Row&& unused_unless(U S::*field, std::vector<std::string> values, const Parts&... reason) && {
    this->data_->unused.push_back({field_id(field), std::move(values), false, Text::of(reason...)});
    return std::move(*this);
  }
  // ... while a switch is on, or a path not given.
  template <class... Parts>
  Row&& unused_with(bool S::*toggle, const Parts&... reason) && {
    return std::move(*this).unused_when(toggle, {"true"}, reason...);
  }
  template <class... Parts>
  Row&& unused_without(std::string S::*path, const Parts&... reason) && {
    return std::move(*this).unused_when(path, {""}, reason...);
  }

  // Kept in the checkpoint as `write` makes it (under "run.<name>" or "config.<name>", the
  // flag's own name when empty), and read back by `read` (false: not a value it takes).
  template <class R>
  Row&& recorded_as(std::string name, std::function<R(const S&)> write, std::function<bool(R, S&)> read) && {
    this->data_->record =
        RowData::Record{std::move(name), &value_type<R>(),
                        [write](const void* s) {
                          const R value = write(*static_cast<const S*>(s));
                          return value_type<R>().record(&value);
                        },
                        [read](const std::string& text, void* s) {
                          R value{};
                          return value_type<R>().read(text, &value) && read(value, *static_cast<S*>(s));
                        }};
    return std::move(*this);
  }
  // What a checkpoint written before the flag existed held.
  Row&& absent_means(std::string record) && {
    this->data_->absent = std::move(record);
    return std::move(*this);
  }

  std::shared_ptr<const RowData> data() && { return std::move(this->data_); }

 private:
  void bind_to(T S::*field) {
    const Shape shape = this->data_->shape;
    constexpr bool whole = std::is_integral_v<T> && !std::is_same_v<T, bool>,
                   real = std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>>;
    if (whole != (shape == Shape::whole) || real != (shape == Shape::real) ||
        std::is_same_v<T, bool> != (shape == Shape::toggle))
      throw std::logic_error(this->data_->flag.dashed() + ": a field of another type than the flag takes");
    this->data_->type = &value_type<T>();
    this->data_->field = field_id(field);
    this->data_->locate = [field](void* settings) -> void* { return &(static_cast<S*>(settings)->*field); };
  }
  Row&& kind(Kind kind) {
    this->data_->kind = kind;
    return std::move(*this);
  }
  static std::function<T(const S&)> constant(T value) {
    return [value](const S&) { return value; };
  }
  static Text shown(const T& value) {
    const ValueType& type = value_type<T>();
    return Text::of(type.readable(type.record(&value)));
  }
  Row&& add_fallback(std::string recipe, std::function<T(const S&)> made, Text shown_as) {
    this->data_->fallbacks.push_back({std::move(recipe),
                                      [made, locate = this->data_->locate](void* s) {
                                        *static_cast<T*>(locate(s)) = made(*static_cast<const S*>(s));
                                      },
                                      std::move(shown_as)});
    return std::move(*this);
  }
};

// What a table is written with: `using namespace tools::setting;` brings the rows'
// builders (whole, real, choice, text, path, toggle, bind), Text and the shared flags.
namespace setting {

using tools::Text;

// Rows of a program's own flags, by what they take.
template <class S, class T>
Row<S, T> whole(T S::*field, std::string name) {
  return {field, std::move(name), Shape::whole};
}
template <class S, class T>
Row<S, T> real(T S::*field, std::string name) {
  return {field, std::move(name), Shape::real};
}
template <class S>
Row<S, std::string> choice(std::string S::*field, std::string name, std::vector<std::string> choices) {
  return {field, std::move(name), Shape::choice, std::move(choices)};
}
template <class S>
Row<S, std::string> text(std::string S::*field, std::string name) {
  return {field, std::move(name), Shape::text};
}
template <class S>
Row<S, std::string> path(std::string S::*field, std::string name) {
  return {field, std::move(name), Shape::path};
}
template <class S>
Row<S, bool> toggle(bool S::*field, std::string name) {
  return {field, std::move(name), Shape::toggle};
}
// A row of a flag declared for several programs (flags.hpp).
template <class S, class T>
Row<S, T> bind(T S::*field, const Declaration& declared) {
  return {field, declared};
}

}  // namespace setting

// The table's work, on settings known by address (Settings<S> gives them their type).
class SettingsCore {
 public:
  struct RecipeRule {
    std::string name;
    std::function<bool(const void*)> applies;
  };
  SettingsCore(std::string program, Text about, std::type_index owner, std::vector<std::shared_ptr<const RowData>> rows,
               std::vector<RecipeRule> recipes);

  // The rows a checkpoint's settings are agreed with or read for.
  using Selection = std::function<bool(const RowData&)>;
  static Selection of_kinds(std::set<Kind> kinds);

  std::optional<int> parse(int argc, char** argv, void* settings, Given& given) const;
  void apply_defaults(void* settings, const Given& kept) const;
  void check(const void* settings) const;
  void refuse_unused(const void* settings, const Given& given) const;
  Metadata record(const void* settings) const;
  void agree(const Metadata& checkpoint, const void* settings, const Given& given, const Selection& selected) const;
  Given read(const Metadata& checkpoint, void* settings, const Given& given, const Selection& selected) const;
  [[noreturn]] void explain(const SettingError& error, const Metadata& checkpoint, const Given& given,
                            const std::string& source) const;
  std::string help(const CLI::App& app) const;  // --help (settings_help.cpp)
  const RowData& row(const FieldId& field) const;
  std::string key(const RowData& row) const;  // "config.<name>" or "run.<name>"

 private:
  std::shared_ptr<CLI::FormatterBase> help_formatter() const;
  const RowData* find(const FieldId& field) const;
  const RowData* find(const std::string& name) const;
  std::string value(const RowData& row, const void* settings) const;
  // The first of `row`'s unused conditions that holds, the rows it names valued by `held`.
  const RowData::Unused* unused_by(const RowData& row, const std::function<std::string(const RowData&)>& held) const;

  std::string program_;
  Text about_;
  std::type_index owner_;
  std::vector<std::shared_ptr<const RowData>> rows_;
  std::vector<RecipeRule> recipes_;
};

// Program S's table (see the top of this file).
template <class S>
class Settings {
 public:
  struct AnyRow {
    template <class T>
    AnyRow(Row<S, T>&& row) : data(std::move(row).data()) {}  // NOLINT: rows convert as they are listed
    std::shared_ptr<const RowData> data;
  };
  using Rows = std::vector<AnyRow>;
  Settings(std::string program, Text about, const Rows& rows, std::vector<Recipe<S>> recipes = {})
      : core_(std::move(program), std::move(about), typeid(S), rows_of(rows), rules_of(recipes)) {}

  // The command line into `settings`, every flag not given set to its default (the
  // recipe's, if one applies); `given` the flags given. Nothing when --help or --version
  // printed, and then the exit status.
  std::optional<int> parse(int argc, char** argv, S& settings, Given& given) const {
    return core_.parse(argc, argv, &settings, given);
  }
  S defaults() const {
    S settings{};
    core_.apply_defaults(&settings, {});
    return settings;
  }
  // The defaults again for every flag not in `kept` (after a checkpoint set some).
  void apply_defaults(S& settings, const Given& kept) const { core_.apply_defaults(&settings, kept); }
  // Every row's range and choices (a SettingError naming the flag).
  void check(const S& settings) const { core_.check(&settings); }
  // A flag given that means nothing with the settings as they are: "--beta2 is not used by
  // --optimizer sgd (only adam and adamw keep a second moment)".
  void refuse_unused(const S& settings, const Given& given) const { core_.refuse_unused(&settings, given); }

  // The kept settings as checkpoint entries.
  Metadata record(const S& settings) const { return core_.record(&settings); }
  // Every setting selected (of some kinds, SettingsCore::of_kinds) must be in the
  // checkpoint, and agree with it when given.
  void agree(const Metadata& checkpoint, const S& settings, const Given& given,
             const SettingsCore::Selection& selected) const {
    core_.agree(checkpoint, &settings, given, selected);
  }
  // Reads the checkpoint's settings selected (run settings only where not given); returns
  // the flags read.
  Given read(const Metadata& checkpoint, S& settings, const Given& given,
             const SettingsCore::Selection& selected) const {
    return core_.read(checkpoint, &settings, given, selected);
  }
  void agree(const Metadata& checkpoint, const S& settings, const Given& given, const std::set<Kind>& kinds) const {
    agree(checkpoint, settings, given, SettingsCore::of_kinds(kinds));
  }
  Given read(const Metadata& checkpoint, S& settings, const Given& given, const std::set<Kind>& kinds) const {
    return read(checkpoint, settings, given, SettingsCore::of_kinds(kinds));
  }
  // `error`, when its flag was not given but read from the checkpoint, said as the
  // checkpoint's: "<source>: the checkpoint's config.seq-len = '-5' cannot be used: must be
  // at least 1, got -5".
  [[noreturn]] void explain(const SettingError& error, const Metadata& checkpoint, const Given& given,
                            const std::string& source) const {
    core_.explain(error, checkpoint, given, source);
  }

  template <class T>
  Flag flag(T S::*field) const {
    return core_.row(field_id(field)).flag;
  }
  // The checkpoint's key for a kept setting: "config.vocab".
  template <class T>
  std::string key(T S::*field) const {
    return core_.key(core_.row(field_id(field)));
  }
  std::string key(const RowData& row) const { return core_.key(row); }
  template <class T>
  bool was_given(const Given& given, T S::*field) const {
    return given.count(flag(field).name()) > 0;
  }

 private:
  static std::vector<std::shared_ptr<const RowData>> rows_of(const Rows& rows) {
    std::vector<std::shared_ptr<const RowData>> data;
    for (const AnyRow& row : rows) data.push_back(row.data);
    return data;
  }
  static std::vector<SettingsCore::RecipeRule> rules_of(const std::vector<Recipe<S>>& recipes) {
    std::vector<SettingsCore::RecipeRule> rules;
    for (const Recipe<S>& recipe : recipes)
      rules.push_back(
          {recipe.name, [applies = recipe.applies](const void* s) { return applies(*static_cast<const S*>(s)); }});
    return rules;
  }
  SettingsCore core_;
};

}  // namespace tools
