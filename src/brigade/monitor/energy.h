#pragma once
// Energy per step, per token and per run (docs/metrics.md), one of distributed training's costs.
//
// Measured where the kernel exposes the CPU package energy counters (Linux powercap/RAPL,
// /sys/class/powercap/intel-rapl:<n>/energy_uj, also on AMD since Linux 5.8): the counters are
// per package, i.e. per machine, so they are used only when every rank of the job runs on this
// one machine (then the packages' energy is the job's, other processes on it included), and they
// wrap at max_energy_range_uj. Otherwise, or when the counters are unreadable (they are root-only
// on recent kernels, and absent in most VMs), the energy is estimated from the ranks' busy time,
// their threads and a per-core power the config sets (monitor.core_watts), and every figure says
// "estimated".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace brigade {

// Reads the package-level RAPL domains under root ("intel-rapl:0", "intel-rapl:1", ...; their
// sub-zones "intel-rapl:0:0" are parts of the package and not added again).
class RaplReader {
 public:
  explicit RaplReader(std::string root = "/sys/class/powercap");
  // Whether at least one package counter was found and read.
  bool available() const { return !domains_.empty(); }
  // Joules used by every package since the last call (or since construction), across counter
  // wrap-around; nullopt if a counter could no longer be read.
  std::optional<double> joules_since_last();

 private:
  struct Domain {
    std::string energy_path;
    uint64_t max_range_uj = 0;
    uint64_t last_uj = 0;
  };
  std::vector<Domain> domains_;
};

// The estimate: joules of busy seconds on `threads` cores each of `core_watts`.
double estimated_joules(double busy_s, int64_t threads, double core_watts);

// kWh and grams of CO2 of `joules` at a grid intensity in gCO2 per kWh.
inline double kwh_of(double joules) {
  return joules / 3.6e6;
}
inline double co2_grams_of(double joules, double grid_gco2_per_kwh) {
  return kwh_of(joules) * grid_gco2_per_kwh;
}

}  // namespace brigade
