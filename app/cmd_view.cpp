#include <cstdio>

#include "commands.hpp"
#include "sim/error.hpp"

namespace ctwin {

// Placeholder until 'ctwin view' lands.
int cmd_view(const Args&) {
  std::fputs("ctwin view: not built yet\n", stderr);
  return kExitInternal;
}

}  // namespace ctwin
