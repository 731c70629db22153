#pragma once
// Shamir's secret sharing (Shamir, "How to share a secret", CACM 1979), byte by byte over
// GF(2^8): each byte of the secret is the constant term of its own random polynomial of degree
// t - 1, and share x holds the polynomials' values at x. Any t shares give the secret back by
// Lagrange interpolation at 0; t - 1 shares say nothing about it. Secure aggregation splits the
// 32-byte keys and seeds of a round this way (Bonawitz et al. 2017, protocol.h).
//
// Why libgfshare rather than our own: it is Debian's package made for exactly this (the library
// behind gfsplit / gfcombine, with its theory written up), its log/exp-table arithmetic has had
// more eyes than a fresh version would, and the mistakes a hand-written one invites are quiet
// ones (the zero element, a share number 0 that is the secret itself, a biased coefficient).
// What it leaves to its caller is done here: share numbers non-zero and distinct, the threshold
// and counts in range, and its random source, a process-wide function pointer that would be
// random() (or null) otherwise, set to libsodium's randombytes_buf before any split.
#include <cstdint>
#include <span>
#include <string>

namespace brigade::secagg {

inline constexpr int kMaxShares = 255;  // share numbers are the non-zero elements of GF(2^8)

// Splits `secret` into one share per share number in `numbers` (1..255, distinct, at least
// `threshold` of them), threshold 2..255. shares is (numbers.size(), secret.size()): row i is the
// share numbered numbers[i]. Returns false with *why when the arguments are out of range.
bool shamir_split(std::span<const uint8_t> secret, int threshold, std::span<const uint8_t> numbers,
                  std::span<uint8_t> shares, std::string* why);

// Rebuilds the secret from shares (numbers.size(), secret.size()), row i numbered numbers[i],
// which must be at least `threshold` distinct share numbers 1..255. Interpolates through all the
// shares given; shares of different polynomials (or fewer than the threshold they were made
// with) give a wrong secret, which the caller detects by its own check.
bool shamir_combine(std::span<const uint8_t> numbers, std::span<const uint8_t> shares,
                    int threshold, std::span<uint8_t> secret, std::string* why);

}  // namespace brigade::secagg
