#pragma once
// Where this process sits in a multi-process job, read from the variables that cluster
// launchers set (DESIGN.md decision 6): `brigade launch` and torchrun, Slurm's srun, Open MPI's
// mpirun. brigade never schedules processes itself; it only reads what the engine that started
// it wrote into the environment.
#include <map>
#include <string>

namespace brigade {

struct DistEnv {
  int rank = 0;              // global rank, in [0, world_size)
  int world_size = 1;        // number of processes in the job
  int local_rank = 0;        // rank among the processes on this node, in [0, local_world_size)
  int local_world_size = 1;  // processes on this node
  std::string master_addr = "127.0.0.1";  // where rank 0 serves the rendezvous
  int master_port = 29500;
  std::string source = "none";  // which variables were read: torchrun, openmpi, slurm or none
};

// The default rendezvous port when the engine names none (torchrun's default).
inline constexpr int kDefaultMasterPort = 29500;

using EnvMap = std::map<std::string, std::string>;

// Detects the job layout from `env`, trying in order:
//   torchrun  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//             (set by `brigade launch`, torchrun and Kubernetes PyTorchJob); with
//             TORCHELASTIC_USE_AGENT_STORE=True torchrun's agent serves its own store on
//             MASTER_PORT, so master_port is MASTER_PORT + 1;
//   openmpi   OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE, master from MASTER_ADDR or
//             127.0.0.1 and MASTER_PORT or 29500;
//   slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, local size from
//             SLURM_STEP_TASKS_PER_NODE/SLURM_TASKS_PER_NODE at SLURM_NODEID; master from
//             MASTER_ADDR, else SLURM_LAUNCH_NODE_IPADDR, port MASTER_PORT or 29500;
//   none      a single process: rank 0 of 1.
// Open MPI is tried before Slurm because mpirun inside a Slurm allocation leaves the Slurm
// variables of its daemons (one per node, not per rank) in every rank's environment.
// Every value is validated (an integer, in range, rank < world size, ...); a bad one throws
// ConfigError naming the variable and its value.
DistEnv detect_dist_env(const EnvMap& env);

// The same, reading this process's environment.
DistEnv detect_dist_env();

// This process's environment as a map.
EnvMap current_env();

}  // namespace brigade
