#pragma once
// xgrad's version. The macros are those of the headers a program was compiled with;
// xgrad::version() is that of the library it runs with. CMakeLists.txt reads the
// project's version from here.

#define XGRAD_VERSION_MAJOR 0
#define XGRAD_VERSION_MINOR 1
#define XGRAD_VERSION_PATCH 0
#define XGRAD_VERSION "0.1.0"

namespace xgrad {

const char* version();  // "0.1.0"

}  // namespace xgrad
