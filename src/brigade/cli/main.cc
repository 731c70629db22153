#include <cstdio>

int main() {
  std::puts("brigade: not yet");
  return 0;
}
