// Compiled by the floors test as a file of comm/: monitor/ is a floor above comm/, so this
// include must not be found (docs/architecture.md, "Rooms and floors").
#include "brigade/monitor/log.h"
