#pragma once
// Names the calling thread as tools show it (top -H, /proc/<pid>/task/<tid>/comm, gdb), so a
// CPU profile of a worker tells compute from communication. Linux keeps at most 15 bytes.

namespace brigade {

void name_this_thread(const char* name);

}  // namespace brigade
