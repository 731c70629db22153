#pragma once
// The federated roles' state on disk: the coordinator's (global model, server optimizer state,
// SCAFFOLD's global control variate, the next round) and a client's (its control variate). A
// state file is a handful of named f32 vectors and int64 values:
//
//   u32 magic "BFS1", u32 version, u32 ints, u32 tensors
//   per int:    u32 name length, name, i64 value
//   per tensor: u32 name length, name, i64 count, count f32
//   u32 CRC-32C of every byte before it
//
// It is written whole to a temporary file, fsynced and renamed over the old one (base/file_io.h),
// so a reader sees the previous state or the new one. Reading checks the bounds of every field
// and the checksum before anything is used. Why not the run's sharded checkpoints (ckpt/): those
// describe a model's parameters and optimizer by rank and step; a federated round's state is a
// different set of vectors, owned by one process, and fits in one file.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace brigade {

struct StateFile {
  std::map<std::string, int64_t> ints;
  std::map<std::string, std::vector<float>> tensors;

  int64_t int_or(const std::string& name, int64_t fallback) const;
  // The tensor `name` with exactly `count` values; CheckpointError naming path otherwise.
  const std::vector<float>& tensor(const std::string& name, int64_t count,
                                   const std::string& path) const;
};

// Writes atomically; throws SaveError (exit 8) when the file cannot be written.
void write_state_file(const std::string& path, const StateFile& state);
// Reads and checks; throws CheckpointError (exit 4) naming the path and what is wrong.
StateFile read_state_file(const std::string& path);

}  // namespace brigade
