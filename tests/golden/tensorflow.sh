#!/bin/bash
#SBATCH --job-name=golden.tensorflow-resnet50-n2x4-b64-r0
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=7
#SBATCH --time=01:00:00
#SBATCH --output=<RESULTS>/golden/runs/tensorflow-resnet50-n2x4-b64-r0/slurm-%j.out
#SBATCH --error=<RESULTS>/golden/runs/tensorflow-resnet50-n2x4-b64-r0/slurm-%j.err
#SBATCH --open-mode=append
#SBATCH --partition=gpu
#SBATCH --qos=normal
#SBATCH --mem=0
#SBATCH --gres=gpu:v100:4
#SBATCH --exclusive
#
# ddlbench 0.1.0: campaign golden, run tensorflow-resnet50-n2x4-b64-r0
# tensorflow | resnet50 | 2 node(s) x 4 GPU(s) | per-device batch 64, global 512 | repeat 0
#
# Rendered by ddlbench from slurm_templates/ (base.sh.j2 + tensorflow.sh.j2).
# Every value that came from YAML is shell-quoted. Edit the templates, not this file.
# `ddlbench submit` creates the run folder, where Slurm writes --output; to submit this script
# by hand, create it first: mkdir -p <RESULTS>/golden/runs/tensorflow-resnet50-n2x4-b64-r0

set -Eeuo pipefail

# --- a clean job environment -------------------------------------------------------------------
# sbatch hands the job the submitting shell's environment: an salloc's SLURM_MEM_PER_*, a user's
# SLURM_DISTRIBUTION, SLURM_CPU_BIND or SLURM_HINT, all of which srun reads as options. Every srun
# below states its own placement, so srun's input variables are removed (provenance/job.txt lists
# them). PATH and the module environment are kept: --export=NONE would drop them. The GPU, GRES,
# TRES and container requests go too: a step without them is given all of the job's GPUs, and
# an salloc's SLURM_GPUS_PER_NODE=1 would give each worker step one GPU per node.
ddlbench_unset=()
for ddlbench_v in $(compgen -e); do
  case "${ddlbench_v}" in
    SRUN_* | SLURM_MEM_PER_* | SLURM_MEM_BIND* | SLURM_CPU_BIND* | SLURM_DISTRIBUTION | SLURM_HINT | \
    SLURM_GPU_BIND | SLURM_GPUS_PER_TASK | SLURM_CPUS_PER_GPU | SLURM_TRES_PER_TASK | \
    SLURM_NTASKS_PER_SOCKET | SLURM_NTASKS_PER_CORE | SLURM_NTASKS_PER_GPU | SLURM_THREADS_PER_CORE | \
    SLURM_OVERLAP | SLURM_EXACT | SLURM_EXPORT_ENV | SLURM_CPU_FREQ_REQ | SLURM_STEP_GRES | SLURM_ACCEL_BIND | \
    SLURM_GPUS | SLURM_GPUS_PER_NODE | SLURM_GPUS_PER_SOCKET | SLURM_GRES | SLURM_TRES_BIND | \
    SLURM_CONTAINER)
      ddlbench_unset+=("${ddlbench_v}")
      unset "${ddlbench_v}"
      ;;
  esac
done
# --- Slurm 22.05 or newer: --overlap shares every resource of the allocation ----------------
DDLBENCH_SLURM_VERSION=$(srun --version 2>/dev/null | awk '{print $2}' || true)
if [[ "${DDLBENCH_SLURM_VERSION}" =~ ^[0-9]+\.[0-9]+ ]] &&
  [[ $(printf '%s\n' 22.05 "${DDLBENCH_SLURM_VERSION}" | sort -V | head -n 1) != 22.05 ]]; then
  echo "ddlbench: Slurm ${DDLBENCH_SLURM_VERSION} is older than 22.05, which this job script needs (docs/launching.md)" >&2
  false
fi

export DDLBENCH_CAMPAIGN=golden
export DDLBENCH_RUN_ID=tensorflow-resnet50-n2x4-b64-r0
export DDLBENCH_RUN_DIR=<RESULTS>/golden/runs/tensorflow-resnet50-n2x4-b64-r0
DDLBENCH_BG_PIDS=()

ddlbench_cleanup() {
  # stop background steps (servers, rendezvous) that outlive the workers
  local pid
  for pid in "${DDLBENCH_BG_PIDS[@]+"${DDLBENCH_BG_PIDS[@]}"}"; do
    kill "$pid" 2>/dev/null || true
  done
}
ddlbench_fail() {
  local rc=$1 line=$2
  # set -E runs this trap in subshells too ($(...), ( ), a pipeline's parts): there it only
  # ends the subshell with the failing status, and the main shell's own trap reports the
  # failure once, when the command that ran the subshell fails
  if (( BASH_SUBSHELL > 0 )); then exit "${rc}"; fi
  echo "ddlbench: run ${DDLBENCH_RUN_ID} failed: command at line ${line} of its job script exited with ${rc}" >&2
  echo "${rc}" > "${DDLBENCH_RUN_DIR}/exit_code"
  ddlbench_cleanup
  exit "${rc}"
}
# ddlbench_workers CMD...: the workers' step, watched. A background step (MXNet's scheduler or
# servers, Horovod's rendezvous server) that exits with an error while the workers run stops
# them and ends the job with its exit code at once, instead of leaving the workers waiting for
# it until their watchdog fires. A step Slurm cannot create (too many CPUs asked) fails so.
ddlbench_workers() {
  "$@" &
  local workers=$! pid rc live=("${DDLBENCH_BG_PIDS[@]+"${DDLBENCH_BG_PIDS[@]}"}") left
  while kill -0 "${workers}" 2>/dev/null; do
    left=()
    for pid in "${live[@]+"${live[@]}"}"; do
      if kill -0 "${pid}" 2>/dev/null; then left+=("${pid}"); continue; fi
      rc=0
      wait "${pid}" || rc=$?
      if (( rc != 0 )); then
        echo "ddlbench: a background step of ${DDLBENCH_RUN_ID} (pid ${pid}) exited with ${rc} while the workers ran; stopping them" >&2
        kill "${workers}" 2>/dev/null || true
        wait "${workers}" 2>/dev/null || true
        return "${rc}"
      fi
    done
    live=("${left[@]+"${left[@]}"}")
    sleep 1
  done
  wait "${workers}"
}
trap 'ddlbench_fail $? $LINENO' ERR
trap ddlbench_cleanup EXIT
mkdir -p "${DDLBENCH_RUN_DIR}"
cd "${DDLBENCH_RUN_DIR}"
mkdir -p logs provenance
# --- attempt: every start of this script (a retry, a Slurm requeue) logs into a new folder ---
# logs/attempt-<k>/ (mkdir is atomic: two starts never share one); no log is ever overwritten
ddlbench_attempt=1
until mkdir "logs/attempt-${ddlbench_attempt}" 2>/dev/null; do
  (( ++ddlbench_attempt <= 1000 )) || { echo "ddlbench: cannot create ${DDLBENCH_RUN_DIR}/logs/attempt-N" >&2; false; }
done
export DDLBENCH_ATTEMPT=${ddlbench_attempt}
export DDLBENCH_LOG_DIR="${DDLBENCH_RUN_DIR}/logs/attempt-${ddlbench_attempt}"
echo "job_id=${SLURM_JOB_ID} restarts=${SLURM_RESTART_COUNT:-0} start=$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "${DDLBENCH_LOG_DIR}/job.txt"
echo "ddlbench: attempt ${DDLBENCH_ATTEMPT} of ${DDLBENCH_RUN_ID} (job ${SLURM_JOB_ID}, restart ${SLURM_RESTART_COUNT:-0}), logs in ${DDLBENCH_LOG_DIR}"

# --- run config (docs/run-config.md), read by the workloads -----------------------------------
cat > run.json <<'DDLBENCH_RUN_JSON'
{"allreduce": {"iters": 20,
 "max_bytes": 268435456,
 "min_bytes": 1024,
 "warmup": 5},
 "backend": "nccl",
 "batch_size": 64,
 "campaign": "golden",
 "compile": false,
 "data": {"kind": "synthetic",
 "path": null,
 "samples": 1281167},
 "device": "gpu",
 "epochs": null,
 "format": "ddlbench-run/1",
 "framework": "tensorflow",
 "framework_options": {"communication": "nccl"},
 "global_batch_size": 512,
 "image_size": 224,
 "layout": "default",
 "log_dir": "<RESULTS>/golden/runs/tensorflow-resnet50-n2x4-b64-r0/logs",
 "lr_schedule": {"base_batch_size": 256,
 "decay_epochs": [],
 "decay_factor": 0.1,
 "scaling": "linear",
 "warmup_epochs": 0},
 "mllog": false,
 "mode": "throughput",
 "model": "resnet50",
 "nodes": 2,
 "num_classes": 1000,
 "optimizer": {"base_lr": 0.1,
 "lr": 0.2,
 "momentum": 0.9,
 "name": "sgd",
 "nesterov": false,
 "weight_decay": 0.0001},
 "precision": "amp",
 "repeat": 0,
 "run_id": "tensorflow-resnet50-n2x4-b64-r0",
 "seed": 1234,
 "steps": {"measure": 50,
 "measure_seconds": 10.0,
 "warmup": 10},
 "target_accuracy": null,
 "tasks_per_node": 4,
 "time_limit_s": 3600,
 "variant": null,
 "workload": "tensorflow",
 "world_size": 8}
DDLBENCH_RUN_JSON

# --- software environment -----------------------------------------------------------------
set +u  # module and activation scripts often read unset variables
if ! type module >/dev/null 2>&1; then  # not a login shell: load the site's init
  for ddlbench_init in /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash /etc/profile.d/modules.sh /usr/share/Modules/init/bash; do
    # shellcheck source=/dev/null
    if [[ -r "${ddlbench_init}" ]]; then source "${ddlbench_init}"; break; fi
  done
fi
type module >/dev/null 2>&1 || { echo "ddlbench: no module command on $(hostname) (set module_init in the cluster profile)" >&2; false; }
module purge
module load env/release/2023b
module load lib/TensorFlow/2.16.1-foss-2023b-CUDA-12.4.0
set -u
export PYTHONPATH=<RESULTS>/golden/pkg${PYTHONPATH:+:${PYTHONPATH}}
export PYTHONUNBUFFERED=1
# CUDA numbers GPUs as nvidia-smi and /sys do, so a rank's device index names its PCI device
export CUDA_DEVICE_ORDER=PCI_BUS_ID
# each rank: one device, its cores bound by this policy, recorded in logs/attempt-<k>/placement/
export DDLBENCH_DEVICE=gpu
export DDLBENCH_CPU_BIND=gpu-socket
export DDLBENCH_CORES_PER_TASK=7
export NCCL_SOCKET_IFNAME=ib0
export GLOO_SOCKET_IFNAME=ib0
export DMLC_INTERFACE=ib0
export NCCL_IB_HCA='=mlx5_0:1'
export NCCL_DEBUG=WARN
export OMP_NUM_THREADS=7
export DDLBENCH_NOTE='it'"'"'s a test; $(not run)'

# --- nodes, addresses and ports ------------------------------------------------------------
# Node names need not resolve (Slurm's NodeAddr is what to connect to), so read both once.
DDLBENCH_HOSTS=$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | paste -sd, -)
DDLBENCH_ADDRS=""
declare -A ddlbench_addr=()
while read -r ddlbench_line; do
  ddlbench_name=$(sed -n 's/.*NodeName=\([^ ]*\).*/\1/p' <<<"${ddlbench_line}")
  ddlbench_node_addr=$(sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p' <<<"${ddlbench_line}")
  [[ -n "${ddlbench_name}" ]] && ddlbench_addr["${ddlbench_name}"]=${ddlbench_node_addr:-${ddlbench_name}}
done < <(scontrol -o show node "${SLURM_JOB_NODELIST}" 2>/dev/null || true)
IFS=, read -r -a ddlbench_hosts <<<"${DDLBENCH_HOSTS}"
for ddlbench_h in "${ddlbench_hosts[@]}"; do
  DDLBENCH_ADDRS+="${DDLBENCH_ADDRS:+,}${ddlbench_addr[${ddlbench_h}]:-${ddlbench_h}}"
done
# network.interface: the rendezvous addresses are each node's address on that interface, not its
# NodeAddr (often the management network); a node without one stops the job
declare -A ddlbench_iface=()
while read -r ddlbench_name ddlbench_node_addr; do
  ddlbench_iface["${ddlbench_name}"]=${ddlbench_node_addr}
done < <(srun --overlap --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=1 --mem=1G --mpi=none --cpu-bind=none --gres=none \
  python -m ddlbench.workloads.node.iface_addr ib0)
DDLBENCH_ADDRS=""
for ddlbench_h in "${ddlbench_hosts[@]}"; do
  [[ -n "${ddlbench_iface[${ddlbench_h}]:-}" ]] || { echo "ddlbench: no address on ib0 for ${ddlbench_h}" >&2; false; }
  DDLBENCH_ADDRS+="${DDLBENCH_ADDRS:+,}${ddlbench_iface[${ddlbench_h}]}"
done
IFS=, read -r -a ddlbench_addrs <<<"${DDLBENCH_ADDRS}"
DDLBENCH_FIRST_HOST=${ddlbench_hosts[0]}
DDLBENCH_FIRST_ADDR=${ddlbench_addrs[0]}
export DDLBENCH_HOSTS DDLBENCH_ADDRS DDLBENCH_FIRST_HOST DDLBENCH_FIRST_ADDR
# Ports are drawn at job start below the kernel's ephemeral range and checked free on the first
# node, never derived from the job id: no outgoing connection takes them, no rank can connect
# to itself on one, and jobs that share a node are not given the same ports
# (each node then checks the ports its own workers bind, drawing again when one is in use)
ddlbench_try=0
until DDLBENCH_PORTS=$(srun --overlap --nodes=1 --ntasks=1 --nodelist="${DDLBENCH_FIRST_HOST}" --cpus-per-task=1 --mem=1G --mpi=none --cpu-bind=none --gres=none \
    python -m ddlbench.workloads.node.ports --count 8) &&
  srun --overlap --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=1 --mem=1G --mpi=none --cpu-bind=none --gres=none \
    python -m ddlbench.workloads.node.ports --verify "${DDLBENCH_PORTS}" --per-node 4; do
  (( ++ddlbench_try < 5 )) || { echo "ddlbench: found no ports free on every node" >&2; false; }
done
DDLBENCH_PORT=${DDLBENCH_PORTS%%,*}
export DDLBENCH_PORTS DDLBENCH_PORT
echo "ddlbench: ports ${DDLBENCH_PORTS} on ${DDLBENCH_FIRST_HOST}"

# --- provenance ------------------------------------------------------------------------------
{
  echo "job_id=${SLURM_JOB_ID}"
  echo "nodelist=${SLURM_JOB_NODELIST}"
  echo "hosts=${DDLBENCH_HOSTS}"
  echo "addrs=${DDLBENCH_ADDRS}"
  echo "batch_host=$(hostname)"
  echo "start=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "ddlbench_version=0.1.0"
  echo "kernel=$(uname -srm)"
  echo "slurm_version=${DDLBENCH_SLURM_VERSION}"
  echo "unset=${ddlbench_unset[*]+"${ddlbench_unset[*]}"}"
} > "${DDLBENCH_RUN_DIR}/provenance/job.txt"
env | grep -E '^(SLURM_|CUDA_|NCCL_|GLOO_|DMLC_|OMP_|MKL_|DDLBENCH_)' | sort > "${DDLBENCH_RUN_DIR}/provenance/env.txt" || true
(module list) > "${DDLBENCH_RUN_DIR}/provenance/modules.txt" 2>&1 || true
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,persistence_mode,ecc.mode.current,clocks.applications.graphics,clocks.applications.memory,clocks.max.sm \
    --format=csv > "${DDLBENCH_RUN_DIR}/provenance/gpus.txt" 2>&1 || true
  # clocks, persistence mode, ECC and the GPU/NIC/CPU topology (NVLink, PCIe switches, NUMA)
  nvidia-smi -q > "${DDLBENCH_RUN_DIR}/provenance/nvidia-smi-q.txt" 2>&1 || true
  nvidia-smi topo -m > "${DDLBENCH_RUN_DIR}/provenance/gpu-topology.txt" 2>&1 || true
fi
# packages.txt is written by rank 0 of the workload: the packages of the environment the ranks
# run in (venv, Apptainer image or Pyxis container alike)
lscpu > "${DDLBENCH_RUN_DIR}/provenance/cpu.txt" 2>/dev/null || true

# --- interference pre-flight, one task per node (docs/telemetry.md) -------------------------
# other processes' CPU use over a short window (/proc/stat), after the port steps above have
# imported any container image: neither that import nor the 1-minute load average counts
srun --overlap --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=1 --mem=1G --mpi=none --cpu-bind=none \
  python -m ddlbench.workloads.node.preflight --policy warn --out "${DDLBENCH_RUN_DIR}/provenance/preflight"
# --- GPU telemetry: local rank 0 of each node starts the sampler inside the workers' step -----
# (a step of its own would need the node's GPUs beside the workers'), on cores no rank is bound
# to (not local rank 0's), stopped with the ranks
export DDLBENCH_TELEMETRY_DIR="${DDLBENCH_RUN_DIR}/telemetry"
# the first node's ranks log NCCL's INIT and NET lines (the transport, each channel's NIC) to
# logs/attempt-<k>/nccl/: together they use every rail of a node, one rank only its nearest
export DDLBENCH_NCCL_INFO_RANK=0-3
# the adapters NCCL may use (network.ib_hca): a multi-node run whose channels leave one unused
# on the first node is flagged
export DDLBENCH_NCCL_NICS=mlx5_0:1
# the network NCCL must use between nodes (network.nccl): a run on another one is flagged
export DDLBENCH_NCCL_NET=IB

# --- launch ----------------------------------------------------------------------------------
echo "ddlbench: starting ${DDLBENCH_RUN_ID} on ${DDLBENCH_HOSTS} (job ${SLURM_JOB_ID})"
# TensorFlow MultiWorkerMirroredStrategy: one worker task per GPU (or CPU rank). Each task
# builds its TF_CONFIG from the Slurm environment before importing TensorFlow: worker i listens
# on DDLBENCH_ADDRS[node of i]:DDLBENCH_PORTS[i] and its task index is SLURM_PROCID
# (TF's SlurmClusterResolver assumes GPUs and fails on CPU nodes, so it is not used).
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
srun --nodes=2 --ntasks=8 --ntasks-per-node=4 --kill-on-bad-exit=1 --cpus-per-task=7 --distribution=block:cyclic --cpu-bind=none \
  python -m ddlbench.workloads.node.rank_start tensorflow "${DDLBENCH_RUN_DIR}/run.json"
echo "ddlbench: ${DDLBENCH_RUN_ID} finished"
echo 0 > "${DDLBENCH_RUN_DIR}/exit_code"
