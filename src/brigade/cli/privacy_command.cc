// brigade privacy: the (epsilon, delta) that DP-FedAvg spends, before a run, as TF Privacy's
// compute_dp_sgd_privacy does for DP-SGD. Given the sampling probability q (the coordinator's
// fed.clients_per_round / clients), the noise multiplier z (fed.dp_noise) and the rounds, it
// prints epsilon from the same RDP accountant the coordinator runs (fed/privacy_accountant.h),
// so the number matches the run's dp_epsilon. Given a target epsilon instead of z, it finds the
// smallest z that reaches it: epsilon falls as z grows at every order, and so does their minimum,
// so bisection on z converges to it.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "brigade/base/error.h"
#include "brigade/cli/commands.h"
#include "brigade/fed/privacy_accountant.h"

namespace brigade::cli {

namespace {

// fed.dp_noise's upper limit (runtime/config_validate.cc): a larger z could not be run.
constexpr double kMaxNoise = 1e6;
// Bisection stops when the bracket is this narrow relative to z, far below the digits printed.
constexpr double kRelativeTolerance = 1e-10;
// Significant digits of a solved z: it is printed rounded up, so the printed value is feasible.
constexpr int kNoiseDigits = 7;

struct PrivacyArgs {
  double q = -1;
  double noise = -1;
  double epsilon = -1;
  int64_t rounds = 0;
  double delta = 1e-5;  // fed.dp_delta's default
  bool json = false;
  CLI::Option* noise_option = nullptr;
  CLI::Option* epsilon_option = nullptr;
};

struct Spent {
  double epsilon = 0;
  double order = 0;  // the RDP order that gives it (0 when no order bounds it)
};

Spent spent(double q, double z, int64_t rounds, double delta) {
  PrivacyAccountant accountant;
  accountant.compose(q, z, rounds);
  Spent s;
  s.epsilon = accountant.epsilon(delta, &s.order);
  return s;
}

void validate(const PrivacyArgs& a) {
  // Written as !(in range) so that a NaN is refused too.
  if (!(a.q >= 0 && a.q <= 1)) {
    throw ConfigError(
        fmt::format("--q = {}: must be in [0, 1] (the share of clients sampled per round, "
                    "fed.clients_per_round / clients)",
                    a.q));
  }
  if (a.rounds < 1) throw ConfigError(fmt::format("--rounds = {}: must be at least 1", a.rounds));
  if (!(a.delta > 0 && a.delta < 1)) {
    throw ConfigError(fmt::format("--delta = {}: must be in (0, 1)", a.delta));
  }
  const bool noise = a.noise_option->count() > 0, epsilon = a.epsilon_option->count() > 0;
  if (noise == epsilon) {
    throw ConfigError(
        "give exactly one of --noise Z (prints the epsilon it spends) and --epsilon E (prints "
        "the smallest noise multiplier that reaches it)");
  }
  if (noise && !(a.noise >= 0 && a.noise <= kMaxNoise)) {
    throw ConfigError(
        fmt::format("--noise = {}: must be in [0, {}] (fed.dp_noise's range)", a.noise, kMaxNoise));
  }
  if (epsilon && !(a.epsilon > 0 && std::isfinite(a.epsilon))) {
    throw ConfigError(fmt::format("--epsilon = {}: must be finite and > 0", a.epsilon));
  }
}

// z rounded up to kNoiseDigits significant digits, as text and as the double it parses to.
double round_up(double z, std::string* text) {
  const double unit = std::pow(10.0, std::floor(std::log10(z)) - (kNoiseDigits - 1));
  double up = std::ceil(z / unit) * unit;
  for (;;) {
    *text = fmt::format("{:.{}g}", up, kNoiseDigits);
    const double parsed = std::strtod(text->c_str(), nullptr);
    if (parsed >= z) return parsed;
    up += unit;  // the decimal text fell below z: one more unit
  }
}

// The smallest z in [0, kMaxNoise] with epsilon <= target, rounded up for printing.
double solve_noise(const PrivacyArgs& a, std::string* text) {
  auto reaches = [&](double z) { return spent(a.q, z, a.rounds, a.delta).epsilon <= a.epsilon; };
  if (reaches(0)) {  // q = 0: nothing is ever released
    *text = "0";
    return 0;
  }
  double lo = 0, hi = 1;
  while (!reaches(hi)) {
    lo = hi;
    hi *= 2;
    if (hi > kMaxNoise) {
      if (reaches(kMaxNoise)) {
        hi = kMaxNoise;
        break;
      }
      throw ConfigError(fmt::format(
          "--epsilon = {}: not reached with q = {}, {} rounds and delta = {} by any noise "
          "multiplier up to {} (fed.dp_noise's limit); raise --epsilon or --delta",
          a.epsilon, a.q, a.rounds, a.delta, kMaxNoise));
    }
  }
  while (hi - lo > kRelativeTolerance * hi) {
    const double mid = 0.5 * (lo + hi);
    (reaches(mid) ? hi : lo) = mid;
  }
  return round_up(hi, text);
}

std::string epsilon_text(double eps) {
  return std::isinf(eps) ? "inf (no noise: no privacy)" : fmt::format("{:.6g}", eps);
}

nlohmann::json json_number(double x) {
  return std::isinf(x) ? nlohmann::json(nullptr) : nlohmann::json(x);
}

int run_privacy(const PrivacyArgs& a) {
  validate(a);
  const bool solve = a.epsilon_option->count() > 0;
  std::string z_text = fmt::format("{}", a.noise);
  const double z = solve ? solve_noise(a, &z_text) : a.noise;
  const Spent s = spent(a.q, z, a.rounds, a.delta);
  if (a.json) {
    nlohmann::ordered_json j = {{"q", a.q},
                                {"noise", z},
                                {"rounds", a.rounds},
                                {"delta", a.delta},
                                {"epsilon", json_number(s.epsilon)},
                                {"order", s.order}};
    if (solve) j["target_epsilon"] = a.epsilon;
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  const std::string setting = fmt::format("q = {}, {} round{}, delta = {}", a.q, a.rounds,
                                          a.rounds == 1 ? "" : "s", a.delta);
  // No order to name where nothing is spent (q = 0) or nothing bounds it (z = 0).
  const bool bounded = s.epsilon > 0 && std::isfinite(s.epsilon);
  const std::string order = bounded ? fmt::format(" (best RDP order {})", s.order) : std::string();
  if (solve) {
    std::printf("%s: noise multiplier z = %s reaches epsilon = %s <= %s%s\n", setting.c_str(),
                z_text.c_str(), epsilon_text(s.epsilon).c_str(),
                fmt::format("{}", a.epsilon).c_str(), order.c_str());
  } else {
    std::printf("%s, noise multiplier z = %s: epsilon = %s%s\n", setting.c_str(), z_text.c_str(),
                epsilon_text(s.epsilon).c_str(), order.c_str());
  }
  return 0;
}

}  // namespace

Command add_privacy(CLI::App& app) {
  auto args = std::make_shared<PrivacyArgs>();
  auto* sub = app.add_subcommand(
      "privacy",
      "the (epsilon, delta) of DP-FedAvg for q, noise and rounds, or the noise for an epsilon");
  sub->add_option("--q", args->q,
                  "sampling probability per client and round, in [0, 1] "
                  "(fed.clients_per_round / clients)")
      ->required();
  args->noise_option =
      sub->add_option("--noise", args->noise, "noise multiplier z >= 0 (fed.dp_noise)");
  args->epsilon_option = sub->add_option(
      "--epsilon", args->epsilon, "target epsilon > 0: print the smallest z that reaches it");
  sub->add_option("--rounds", args->rounds, "rounds, >= 1 (fed.rounds)")->required();
  sub->add_option("--delta", args->delta, "delta, in (0, 1) (fed.dp_delta; default 1e-5)");
  sub->add_flag("--json", args->json,
                "print one JSON object: q, noise, rounds, delta, epsilon, order");
  return [args]() { return run_privacy(*args); };
}

}  // namespace brigade::cli
