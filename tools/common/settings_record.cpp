// The settings a checkpoint keeps, from the table's rows: written as "config.<name>"
// (model and learning settings) and "run.<name>" (run settings), compared on resume and
// fine-tuning, and read back (settings.hpp).
#include <algorithm>

#include "settings.hpp"
#include "xgrad/autograd/error.hpp"

namespace tools {

namespace {

const ValueType& record_type(const RowData& row) { return row.record ? *row.record->type : *row.type; }

std::string record_of(const RowData& row, const void* settings) {
  if (row.record) return row.record->write(settings);
  return row.type->record(row.field_in(settings));
}

}  // namespace

std::string SettingsCore::key(const RowData& row) const {
  const std::string name = row.record && !row.record->name.empty() ? row.record->name : row.flag.name();
  return (row.kind == Kind::run ? "run." : "config.") + name;
}

Metadata SettingsCore::record(const void* settings) const {
  Metadata metadata;
  for (const auto& row : rows_) {
    if (row->kind == Kind::local) continue;
    const std::string text = record_of(*row, settings);
    if (!text.empty()) metadata[key(*row)] = text;  // an unset target or no text: not kept
  }
  return metadata;
}

SettingsCore::Selection SettingsCore::of_kinds(std::set<Kind> kinds) {
  return [kinds = std::move(kinds)](const RowData& row) { return kinds.count(row.kind) > 0; };
}

void SettingsCore::agree(const Metadata& checkpoint, const void* settings, const Given& given,
                         const Selection& selected) const {
  // The value a row will have once the checkpoint's are taken: the checkpoint's, for the
  // rows it carries (kept as the field's own text), else the one here.
  const auto taken = [&](const RowData& target) {
    const auto it = checkpoint.find(key(target));
    return selected(target) && !target.record && it != checkpoint.end() ? it->second : value(target, settings);
  };
  for (const auto& row : rows_) {
    if (!selected(*row)) continue;
    const auto it = checkpoint.find(key(*row));
    if (it == checkpoint.end() && !row->absent)
      throw UsageError(
          xgrad::str("the checkpoint has no setting for ", row->flag, " (not written by this ", program_, "?)"));
    const std::string& held = it != checkpoint.end() ? it->second : *row->absent;
    const std::string here = record_of(*row, settings);
    // A flag the checkpoint's settings leave unused is refused as such (refuse_unused),
    // not as a difference from a value that did nothing.
    if (given.count(row->flag.name()) && held != here && !unused_by(*row, taken)) {
      const ValueType& type = record_type(*row);
      throw UsageError(xgrad::str("the checkpoint is from another config: ", row->flag, " ", type.readable(here),
                                  " here, ", type.readable(held), " in the checkpoint"));
    }
  }
}

Given SettingsCore::read(const Metadata& checkpoint, void* settings, const Given& given,
                         const Selection& selected) const {
  Given read;
  for (const auto& row : rows_) {
    if (!selected(*row) || (row->kind == Kind::run && given.count(row->flag.name()))) continue;
    const std::string name = key(*row);
    const auto it = checkpoint.find(name);
    if (it == checkpoint.end() && !row->absent) {
      if (row->kind == Kind::run) continue;  // not kept (an unset target): the default stands
      throw UsageError(xgrad::str("the checkpoint has no setting for ", row->flag));
    }
    const std::string& text = it != checkpoint.end() ? it->second : *row->absent;
    const bool readable =
        row->record ? row->record->read(text, settings) : row->type->read(text, row->field_in(settings));
    if (!readable)
      throw UsageError(
          xgrad::str("the checkpoint's ", name, " = '", one_line(text), "' is not ", record_type(*row).expected()));
    read.insert(row->flag.name());
  }
  return read;
}

void SettingsCore::explain(const SettingError& error, const Metadata& checkpoint, const Given& given,
                           const std::string& source) const {
  const RowData* row = find(error.flag.name());
  if (row && row->kind != Kind::local && !given.count(error.flag.name()))
    if (const auto it = checkpoint.find(key(*row)); it != checkpoint.end()) {
      std::vector<std::string> with;
      for (const Flag& other : error.with)
        if (given.count(other.name())) with.push_back(other.dashed());
      throw UsageError(xgrad::str(source, ": the checkpoint's ", it->first, " = '", one_line(it->second),
                                  "' cannot be used", with.empty() ? "" : " with " + xgrad::listed(with, " and "), ":",
                                  error.rest));
    }
  throw error;
}

}  // namespace tools
