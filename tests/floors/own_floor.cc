// Compiled by the floors test as a file of comm/: its own room and the rooms below it are found.
#include "brigade/base/check.h"
#include "brigade/comm/communicator.h"
#include "brigade/tensor/bf16.h"
