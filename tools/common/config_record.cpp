// What xgrad-train keeps in a checkpoint of its settings, and what --resume and
// --init-from take back from it (the table's rows say which and how).
#include "config.hpp"

namespace tools {

namespace {

using Selection = SettingsCore::Selection;

// Every selected setting must be in the checkpoint, and agree with it when given, as the
// run will have it: beside the checkpoint's other settings (--ff 0 is 4 x the checkpoint's
// --d-model, not the default's).
void agree(const Metadata& metadata, const Config& c, const Given& given, const Selection& selected) {
  const Settings<Config>& table = settings_of<Config>();
  Config merged = c;
  table.read(metadata, merged, given, [&](const RowData& row) {
    return selected(row) && !given.count(row.flag.name()) && metadata.count(table.key(row));
  });
  table.agree(metadata, merged, given, selected);
}

// Reads the checkpoint's selected settings; every setting neither given nor read takes its
// default again, under the checkpoint's recipe (an lm checkpoint's, say).
void take(const Metadata& metadata, Config& c, const Given& given, const Selection& selected) {
  const Settings<Config>& table = settings_of<Config>();
  Given kept = table.read(metadata, c, given, selected);
  kept.insert(given.begin(), given.end());
  table.apply_defaults(c, kept);
}

}  // namespace

Metadata to_metadata(const Config& config) { return settings_of<Config>().record(config); }

void apply_metadata(const Metadata& metadata, Config& config, const Given& given) {
  agree(metadata, config, given, SettingsCore::of_kinds({Kind::model, Kind::learning}));
  take(metadata, config, given, SettingsCore::of_kinds({Kind::model, Kind::learning, Kind::run}));
}

void apply_model_metadata(const Metadata& metadata, Config& config, const Given& given, bool adapters) {
  const Selection model = SettingsCore::of_kinds({Kind::model});
  const Selection selected = [&](const RowData& row) {
    return model(row) ||
           (adapters && (row.field == field_id(&Config::lora_alpha) || row.field == field_id(&Config::lora_targets)));
  };
  agree(metadata, config, given, selected);
  take(metadata, config, given, selected);
}

}  // namespace tools
