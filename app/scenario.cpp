// Placeholder: the scenario loader lands with its tests (issue 2).
#include "scenario.hpp"
