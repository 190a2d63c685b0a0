// What xgrad-train keeps in a checkpoint of its settings, and what --resume and
// --init-from take back from it (the table's rows say which and how).
#include "config.hpp"

namespace tools {

namespace {

// Reads the checkpoint's settings of `kinds`; every setting neither given nor read takes
// its default again, under the checkpoint's recipe (an lm checkpoint's, say).
void take(const Metadata& metadata, Config& c, const Given& given, const std::set<Kind>& kinds) {
  const Settings<Config>& table = settings_of<Config>();
  Given kept = table.read(metadata, c, given, kinds);
  kept.insert(given.begin(), given.end());
  table.apply_defaults(c, kept);
}

}  // namespace

Metadata to_metadata(const Config& config) { return settings_of<Config>().record(config); }

void apply_metadata(const Metadata& metadata, Config& config, const Given& given) {
  settings_of<Config>().agree(metadata, config, given, {Kind::model, Kind::learning});
  take(metadata, config, given, {Kind::model, Kind::learning, Kind::run});
}

void apply_model_metadata(const Metadata& metadata, Config& config, const Given& given) {
  settings_of<Config>().agree(metadata, config, given, {Kind::model});
  take(metadata, config, given, {Kind::model});
}

}  // namespace tools
