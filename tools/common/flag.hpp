#pragma once
// A flag as messages name it. Each program's table declares its flags (settings.hpp);
// code names one through its row, flag(&Config::warmup), never by writing it again.

#include <ostream>
#include <string>
#include <utility>

namespace tools {

// Streams as "--warmup".
class Flag {
 public:
  Flag() = default;
  explicit Flag(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }  // "warmup"
  std::string dashed() const { return "--" + name_; }
  friend std::ostream& operator<<(std::ostream& os, const Flag& flag) { return os << "--" << flag.name_; }

 private:
  std::string name_;
};

}  // namespace tools
