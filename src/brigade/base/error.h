#pragma once
// The errors that the environment or the user can cause. The CLI catches them, prints one line
// and exits with the code of their kind (see exit_code()). Programmer invariants use
// BRIGADE_CHECK (base/check.h) instead.
#include <stdexcept>
#include <string>

namespace brigade {

// Exit codes of the `brigade` binary, one per kind of failure.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,       // anything not listed below
  kExitConfig = 2,        // invalid config or command line: nothing was started
  kExitIo = 3,            // missing/unreadable/corrupt file
  kExitCheckpoint = 4,    // no usable checkpoint
  kExitComm = 5,          // a collective timed out or a peer was lost
  kExitNonFinite = 6,     // NaN/Inf loss stopped the run
  kExitWorkerFailed = 7,  // the launcher lost a worker
  kExitSaveFailed = 8     // the run's last checkpoint could not be saved, even when retried
};

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  virtual int exit_code() const { return kExitFailure; }
};

// Invalid configuration: the message names the key, the value and what is allowed.
class ConfigError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitConfig; }
};

// A file is missing, unreadable, malformed or fails its checksum; the message names the path.
class IoError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitIo; }
};

class CheckpointError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitCheckpoint; }
};

// A collective failed. kind tells a timeout from a lost peer.
class CommError : public Error {
 public:
  enum class Kind { kTimeout, kPeerLost, kOther };
  CommError(Kind kind, const std::string& what) : Error(what), kind_(kind) {}
  Kind kind() const { return kind_; }
  int exit_code() const override { return kExitComm; }

 private:
  Kind kind_;
};

// The last checkpoint of a run (its final step, or run.stop_after's) failed to save, and so did
// the retry: the steps after the last saved one are lost. The message names that step.
class SaveError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitSaveFailed; }
};

// The loss became NaN or Inf; the message names the step.
class NonFiniteError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitNonFinite; }
};

}  // namespace brigade
