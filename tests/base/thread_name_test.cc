// name_this_thread (base/thread_name.h): the name is what /proc shows for that thread, cut to
// the 15 bytes Linux keeps, and other threads keep theirs.
#include "brigade/base/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

namespace brigade {
namespace {

std::string proc_name_of_this_thread() {
  const long tid = ::syscall(SYS_gettid);
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

TEST(ThreadName, ShowsInProcAndIsCutTo15Bytes) {
  const std::string main_before = proc_name_of_this_thread();
  std::string short_name, long_name;
  std::thread t([&] {
    name_this_thread("brigade-test");
    short_name = proc_name_of_this_thread();
    name_this_thread("a-name-longer-than-fifteen-bytes");
    long_name = proc_name_of_this_thread();
  });
  t.join();
  EXPECT_EQ(short_name, "brigade-test");
  EXPECT_EQ(long_name, "a-name-longer-t");
  EXPECT_EQ(proc_name_of_this_thread(), main_before);
}

}  // namespace
}  // namespace brigade
