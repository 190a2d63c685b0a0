#pragma once
// The learning curve as a PNG (--plot): train and validation loss against step, with
// axis labels, ticks, a legend and the run's settings as the title.

#include <string>
#include <vector>

#include "flag.hpp"
#include "progress.hpp"

namespace tools {

// `flag` names the option in errors.
void write_learning_curve_png(const std::string& path, const Flag& flag, const std::vector<CurvePoint>& points,
                              const std::string& title);

}  // namespace tools
