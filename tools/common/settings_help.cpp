// --help, made from the table: every row with what it takes, its help and its defaults
// ("[64; lm 12]": the default, then each recipe's), grouped by what a checkpoint does with
// it. Nothing in it depends on the machine (docs/cli.md holds it as printed).
#include <CLI/CLI.hpp>

#include <sstream>

#include "settings.hpp"

namespace tools {

namespace {

constexpr std::size_t kWidth = 100;  // columns of a line
constexpr std::size_t kColumn = 28;  // where the help of a flag begins

std::string trimmed(const std::string& line) { return line.substr(0, line.find_last_not_of(' ') + 1); }

// `text` after `lead`, in lines of at most kWidth columns (unless one word is longer); the
// lines after the first indented by `indent`. A line break in `text` is kept, and the
// spaces that begin the line after it.
std::string wrapped(const std::string& lead, const std::string& text, std::size_t indent) {
  if (text.empty()) return trimmed(lead) + '\n';
  std::string out, line = lead;
  bool words_on_line = false;
  std::istringstream paragraphs(text);
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    line += paragraph.substr(0, paragraph.find_first_not_of(' '));
    std::istringstream words(paragraph);
    for (std::string word; words >> word;) {
      if (words_on_line && line.size() + 1 + word.size() > kWidth) {
        out += trimmed(line) + '\n';
        line = std::string(indent, ' ');
        words_on_line = false;
      }
      line += (words_on_line ? " " : "") + word;
      words_on_line = true;
    }
    out += trimmed(line) + '\n';
    line = std::string(indent, ' ');
    words_on_line = false;
  }
  return out;
}

// The flag and what it takes, padded to the help's column (alone on its line when longer).
std::string flag_lead(const std::string& names, const char* takes) {
  std::string lead = "  " + names + (*takes ? " " : "") + takes;
  if (lead.size() + 1 > kColumn) return lead + '\n' + std::string(kColumn, ' ');
  return lead + std::string(kColumn - lead.size(), ' ');
}

const char* takes(Shape shape) {
  switch (shape) {
    case Shape::whole:
      return "N";
    case Shape::real:
      return "X";
    case Shape::choice:
      return "NAME";
    case Shape::text:
      return "TEXT";
    case Shape::path:
      return "PATH";
    case Shape::toggle:
      break;
  }
  return "";
}

// "64; lm 12": the default, then each recipe's; nothing for an empty text or a switch off.
std::string defaults_shown(const RowData& row) {
  std::string shown;
  for (const RowData::Fallback& fallback : row.fallbacks) {
    const std::string value = fallback.shown.shown();
    if (value.empty() || (row.shape == Shape::toggle && value == "false")) continue;
    shown += (shown.empty() ? "" : "; ") + (fallback.recipe.empty() ? value : fallback.recipe + " " + value);
  }
  return shown;
}

std::string help_line(const RowData& row) {
  std::string text;
  const auto add = [&](const std::string& part, const char* separator) {
    if (!part.empty()) text += (text.empty() ? "" : separator) + part;
  };
  for (const std::string& choice : row.choices) add(choice, " | ");
  add(row.help.shown(), ": ");
  const std::string defaults = defaults_shown(row);
  add(defaults.empty() ? "" : "[" + defaults + "]", " ");
  add(row.required ? "(required)" : "", " ");
  std::string lead = flag_lead(row.flag.dashed(), takes(row.shape));
  const std::size_t broken = lead.rfind('\n');
  if (broken == std::string::npos) return wrapped(lead, text, kColumn);
  return lead.substr(0, broken + 1) + wrapped(lead.substr(broken + 1), text, kColumn);
}

const char* title(Kind kind) {
  switch (kind) {
    case Kind::model:
      return "The model: kept in the checkpoint; resuming and fine-tuning take it from there (a flag given must "
             "agree):";
    case Kind::learning:
      return "How it learns: kept in the checkpoint; resuming takes it from there (a flag given must agree):";
    case Kind::run:
      return "The run: kept in the checkpoint; resuming takes it from there unless given again:";
    case Kind::local:
      break;
  }
  return "This process alone (not kept):";
}

class TableHelp : public CLI::Formatter {
 public:
  explicit TableHelp(const SettingsCore& core) : core_(core) {}
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    return core_.help(*app);
  }

 private:
  const SettingsCore& core_;
};

}  // namespace

std::shared_ptr<CLI::FormatterBase> SettingsCore::help_formatter() const { return std::make_shared<TableHelp>(*this); }

std::string SettingsCore::help(const CLI::App& app) const {
  std::string text = wrapped(program_ + ": ", about_.shown(), 0) + "\nUsage: " + program_ + " [flags]\n";
  const bool kept = std::any_of(rows_.begin(), rows_.end(), [](const auto& row) { return row->kind != Kind::local; });
  for (const Kind kind : {Kind::model, Kind::learning, Kind::run, Kind::local}) {
    std::string lines;
    for (const auto& row : rows_)
      if (row->kind == kind) lines += help_line(*row);
    if (!lines.empty()) text += std::string("\n") + (kept ? title(kind) : "Flags:") + '\n' + lines;
  }
  for (const CLI::Option* option : {app.get_help_ptr(), app.get_version_ptr()})
    if (option) text += wrapped(flag_lead(option->get_name(false, true), ""), option->get_description(), kColumn);
  return text;
}

}  // namespace tools
