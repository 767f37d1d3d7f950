# The two commands of the README: `make run` (the main job) and `make test` (the whole suite).
# Both set themselves up on a fresh Debian/Ubuntu machine: system packages, .venv, the package.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The bench extra's torch, pinned: an open range takes PyPI's newest build with GBs of CUDA
# libraries; 2.13.0 resolves to the CPU wheel these machines carry (gloo is all the tests need).
TORCH := torch==2.13.0
SAMPLE_RUN := tests/data/sample-run
# Parallel jobs of `make test` and `make molecule`: the machines it runs on have 2 cores.
JOBS ?= 2
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: run test lint unit system-deps sample-report bench clean ansible-lint syntax-check molecule \
  collection bench-ansible bench-staged bench-report bench-slurm \
  test-fixtures tests-without-hosts

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q '$(TORCH)'
	$(PY) -m pip install -q -e '.[dev,bench]'
	touch $(STAMP)

system-deps:
	bash tests/setup/system-packages.sh

## run: the whole validation run on this machine (playbooks/benchmark.yml, inventory/local.ini).
## Without GPUs the GPU phases are skipped and nothing can be measured: the report is written, its
## verdict is ERROR (no evidence is never a pass) and the play exits 2.
run: $(STAMP)
	$(BIN)/ansible-playbook -i inventory/local.ini playbooks/benchmark.yml $(ARGS)

## sample-report: render the bundled sample run (real published outputs) into reports/sample-run
sample-report: $(STAMP)
	rm -rf reports/sample-run && mkdir -p reports && cp -r $(SAMPLE_RUN) reports/sample-run
	$(BIN)/gpuval report reports/sample-run; status=$$?; \
	  echo "report: $(CURDIR)/reports/sample-run/report.html"; \
	  [ $$status -ne 2 ]

## test: lint, type-check and the whole pytest suite (browser and simulated-host tests included).
## The set-up steps run side by side (pip and apt download more than they compute), and so do
## the molecule scenarios and, beside them, the static checks then the tests without simulated
## hosts (each job's output is printed when it is done). Past the set-up, make test keeps both
## cores busy: a molecule scenario or a simulated run uses about a core while it runs (nccl_tests:
## 220 CPU-seconds in 211 s), so the order of these jobs hardly matters; less CPU is what shortens
## it. The tests with simulated hosts share their hosts and runs between a file's assertions; the
## files run $(JOBS) at a time, except the pair tests, which measure the network through the cores
## and so run alone: beside other work, healthy pairs measure below 80 % of the others (repeated,
## and one more repeat from failing).
PAIR_TESTS := tests/e2e/test_find_the_bad_node.py
test:
	$(MAKE) --no-print-directory -j2 $(STAMP) system-deps
	$(MAKE) --no-print-directory -j2 --output-sync=target molecule lint ansible-lint syntax-check \
	  tests-without-hosts
	$(BIN)/pytest -q -m simhosts -n $(JOBS) --dist loadfile --durations=10 --ignore=$(PAIR_TESTS)
	$(BIN)/pytest -q -m simhosts --durations=10 $(PAIR_TESTS)

## lint: ruff, mypy and the import contracts of pyproject.toml (lint-imports: the layers)
lint: $(STAMP)
	$(BIN)/ruff check src tests library plugins
	$(BIN)/ruff format --check src tests library plugins
	$(BIN)/mypy
	$(PY) -m tests.role_docs --check
	$(BIN)/lint-imports

## ansible-lint: production profile over roles, playbooks and molecule scenarios (.ansible-lint)
ansible-lint: $(STAMP)
	$(BIN)/ansible-lint

## syntax-check: every playbook, in one ansible-playbook call (one start-up instead of ten)
syntax-check: $(STAMP)
	$(BIN)/ansible-playbook -i inventory/local.ini --syntax-check playbooks/*.yml

## test-fixtures: NCCL from the nvidia-nccl-cu13 wheel for the build roles' scenarios
test-fixtures: $(STAMP)
	PIP=$(CURDIR)/$(BIN)/pip bash tests/fixtures/nccl-wheel/setup.sh

MOLECULE_ROLES := $(patsubst %/molecule/default/molecule.yml,%,\
  $(wildcard roles/*/molecule/default/molecule.yml))

## molecule: every role's scenario on simulated hosts (root, network namespaces), $(JOBS) at a
## time (one per core: each uses about one); each one's output in build/molecule/.
## tests/molecule/bin/ansible-playbook answers molecule's `--version` check before every step
## from the output recorded here (126 ansible start-ups, 90 CPU-seconds, fewer).
MOLECULE_VERSION_FILE := $(CURDIR)/build/molecule/ansible-playbook-version.txt
molecule: $(STAMP) test-fixtures
	mkdir -p build/molecule
	$(BIN)/ansible-playbook --version > $(MOLECULE_VERSION_FILE)
	source $(BIN)/activate && export PATH=$(CURDIR)/tests/molecule/bin:$$PATH \
	  GPUVAL_ANSIBLE_PLAYBOOK=$(CURDIR)/$(BIN)/ansible-playbook \
	  GPUVAL_ANSIBLE_PLAYBOOK_VERSION=$(MOLECULE_VERSION_FILE) && \
	  printf '%s\n' $(MOLECULE_ROLES) | xargs -P $(JOBS) -I{} bash -c \
	  'role={}; log=$(CURDIR)/build/molecule/$${role##*/}.log; \
	   if (cd "$$role" && molecule test) > "$$log" 2>&1; then echo "molecule $$role: passed"; \
	   else echo "molecule $$role: FAILED, see $$log"; tail -40 "$$log"; exit 1; fi'

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

## tests-without-hosts: every test but the simulated-host ones (unit, corpus, browser, CLI)
tests-without-hosts: $(STAMP)
	$(BIN)/pytest -q -n $(JOBS) -m "not simhosts"

## bench: every benchmark, timings printed, never asserted: the nccl-tests parser on ~100 MB of
## generated logs, its time and memory on 20 MB of real runs and a 200 MB binary file (targets
## 5 s, about twice the file's size), the pair analysis (128 hosts all pairs, 1,024 hosts staged:
## 10 s each), `gpuval report` of 1,024 nodes x 8 GPUs (targets 15 s, 1 GB), `gpuval plan` of
## 1,024 nodes and `gpuval node-health` on the GPU doubles (Slurm's health program: budget 60 s)
bench: $(STAMP)
	$(PY) tests/bench/parse_speed.py
	$(PY) -m tests.bench.parse_memory
	$(PY) -m tests.bench.pair_analysis
	$(PY) -m tests.bench.report_at_scale
	$(PY) -m tests.bench.plan_speed
	$(PY) -m tests.bench.node_health

## bench-report: the report of 1,024 nodes: seconds to write it (target 15) and milliseconds until
## headless Chromium has drawn it (target 5000), printed by its browser tests
bench-report: $(STAMP) system-deps
	$(BIN)/pytest -q -s -p no:cacheprovider tests/browser/test_report_at_scale.py | grep -o 'report of .*'

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache

## collection: assemble gpuval.cluster (roles, playbooks, library/ as plugins/modules, plugins/)
## in build/gpuval.cluster and build it into build/gpuval-cluster-<version>.tar.gz
COLLECTION_DIR := build/gpuval.cluster
collection: $(STAMP)
	rm -rf $(COLLECTION_DIR) && mkdir -p $(COLLECTION_DIR)/plugins/modules
	cp -r collection/. roles playbooks $(COLLECTION_DIR)/
	cp -r plugins/action plugins/callback plugins/inventory plugins/module_utils $(COLLECTION_DIR)/plugins/
	cp library/*.py $(COLLECTION_DIR)/plugins/modules/
	$(BIN)/ansible-galaxy collection build --force --output-path build $(COLLECTION_DIR)

## bench-ansible: the suite's own overhead on simulated hosts (second benchmark.yml run on 3
## hosts with the GPU doubles; the pair phase on 8 hosts in rounds and one pair after another).
## MITOGEN=DIR (pip install --target DIR mitogen) also times a run under Mitogen;
## BENCH_ARGS="--skip overhead" or "--keep DIR" are passed on.
bench-ansible: $(STAMP) system-deps test-fixtures
	$(PY) -m tests.bench.ansible_overhead $(if $(MITOGEN),--mitogen $(MITOGEN)) $(BENCH_ARGS)

## bench-staged: staged mode (group testing) against all pairs, side by side, on 32 simulated
## hosts with node7 throttled: wall time, rounds, flagged nodes. HOSTS=N and BAD="node3 node9"
## change the cluster, BENCH_ARGS="--healthy-first --modes staged" adds a healthy run and skips
## all pairs (not part of make test: 32 hosts hold the machine for a long while).
bench-staged: $(STAMP) system-deps
	$(PY) -m tests.bench.staged_search --hosts $(or $(HOSTS),32) --bad $(or $(BAD),node7) $(BENCH_ARGS)

## bench-slurm: what Slurm as the launcher costs on a simulated Slurm of 3 nodes (gpuval's own
## salloc/scancel and srun commands): allocation granted and released, a pair round of srun steps
## against mpirun over ssh and plain ssh, one step across every node; median and spread of 5
## repeats, the load beside. NODES=N and REPEATS=N change them (not part of make test).
bench-slurm: $(STAMP) system-deps
	$(PY) -m tests.bench.slurm_overhead --nodes $(or $(NODES),3) --repeats $(or $(REPEATS),5)
