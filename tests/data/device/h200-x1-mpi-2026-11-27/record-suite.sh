#!/bin/bash
# The suite on the lent GPU: plan, then benchmark.yml with connection local; everything to $OUT.
set -u
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
R=$PWD
PY=${PY:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
if [ -z "${SKIP_WHEELS:-}" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || { echo wheels failed; exit 3; }
  export PYTHONPATH=/tmp/site:$R/src PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$R/src:$R
fi
{
  date -u; nproc; nvidia-smi -L; command -v mpirun mpicc ssh cmake make g++ git
  ls -d /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h; mpirun --version | head -1
  $PY -c 'import sys, pandas, yaml, jinja2, ansible; print(sys.version.split()[0], pandas.__version__, yaml.__version__, jinja2.__version__, ansible.__version__)'
} > "$OUT/env.txt" 2>&1
NCCL_HOME=${NCCL_HOME:-/opt/nccl}
if [ ! -e "$NCCL_HOME/include/nccl.h" ]; then
  pkg=$($PY -c 'import nvidia.nccl as n; print(list(n.__path__)[0])')
  mkdir -p "$NCCL_HOME/lib" "$NCCL_HOME/include"
  ln -sf "$pkg"/include/* "$NCCL_HOME/include/"
  ln -sf "$pkg"/lib/libnccl.so.2 "$NCCL_HOME/lib/libnccl.so.2"
  ln -sf libnccl.so.2 "$NCCL_HOME/lib/libnccl.so"
fi
# The openmpi role finds MPI from mpicc on PATH; without mpicc or ssh it would need apt (offline).
# The roles' apt steps run only for packages dpkg lacks (gpuval_packages): keep them on when none is.
PREREQ=true
dpkg-query -W -f='${Package} ${db:Status-Status}\n' make g++ git ca-certificates gcc libc6-dev >> "$OUT/env.txt" 2>&1 || PREREQ=false
SKIP=""
command -v mpicc >/dev/null || SKIP="--skip-tags install"
cat > /tmp/vars.json <<J
{"gpuval_run_id": "${RUN_ID:-h200-x1-mpi}", "cuda_home": "/usr/local/cuda", "nccl_home": "$NCCL_HOME",
 "openmpi_manage_ssh": false,
 "nccl_tests_archive": "$R/.gpu/nccl-tests-v2.18.3.tar.gz", "nccl_tests_install_prerequisites": $PREREQ,
 "cuda_samples_install_prerequisites": $PREREQ, "cuda_samples_prebuilt_p2p_binary": "$R/.gpu/p2pBandwidthLatencyTest",
 "health_level": "quick", "health_python": "$PY"}
J
cp /tmp/vars.json "$OUT/vars.json"
echo "skip: $SKIP prerequisites: $PREREQ" >> "$OUT/env.txt"
$PY -m gpuval plan -i .gpu/device.ini -e @/tmp/vars.json > "$OUT/plan.txt" 2>&1
$PY -m gpuval plan -i .gpu/device.ini -e @/tmp/vars.json --json > "$OUT/plan.json" 2>>"$OUT/plan.txt"
rm -rf reports/${RUN_ID:-h200-x1-mpi}  # a warm machine keeps the last try's run folder
start=$(date +%s)
ANSIBLE_LOG_PATH="$OUT/ansible.log" timeout ${PLAY_TIMEOUT:-400} $PY -m ansible playbook -i .gpu/device.ini playbooks/benchmark.yml -e @/tmp/vars.json ${EXTRA:-} $SKIP > "$OUT/ansible-playbook.txt" 2>&1
echo "playbook rc=$? in $(( $(date +%s) - start )) s" | tee -a "$OUT/env.txt"
tail -25 "$OUT/ansible-playbook.txt"
tar czf "$OUT/run.tar.gz" reports/${RUN_ID:-h200-x1-mpi} 2>/dev/null
ls -la "$OUT"
