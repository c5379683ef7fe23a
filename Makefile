# Everyday commands for the notebook suite. `make` alone lists them.
#
# Everything runs inside a virtual environment ($(VENV), .venv by default)
# that `make setup` builds from the pinned requirements files, in one of three variants:
#   make setup                     CPU variant, requirements/cpu.txt (the default)
#   make setup GPU=1               GPU variant, requirements/gpu.txt (CUDA 11.8, cuDNN 8)
#   make setup VARIANT=maintained  maintained variant, requirements/maintained.txt: the maintained
#                                  onnxruntime (1.31.1, no training package), chosen by itself
#                                  when Python 3.13 is the only one found (or PYTHON=... is 3.13)
#   make setup GPU=0               back to the CPU variant (VARIANT=cpu or gpu works too)
# Without VARIANT=... or GPU=..., the variant already installed in $(VENV) is kept.

.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV ?= .venv
PY = $(VENV)/bin/python

VARIANTS := cpu gpu maintained
comma := ,

# The Python versions each variant works on, newest first: the wheels of its onnxruntime package
# and the pins of requirements/base.txt (numpy 2.4, scipy 1.17, pandas 3.1 need 3.11 or later);
# the maintained variant stops at 3.13, where pyproject.toml's requires-python ends.
PYTHON_VERSIONS_cpu := 3.12 3.11
PYTHON_VERSIONS_gpu := 3.11
PYTHON_VERSIONS_maintained := 3.13 3.12 3.11
# The first Python of the versions $(1) on PATH that runs (a pyenv shim that does not is skipped).
find_python = $(firstword $(shell for v in $(1); do \
  p=$$(command -v python$$v) && $$p -c "" 2>/dev/null && { echo $$p; break; }; done))

# The variant: VARIANT=..., else GPU=1 (gpu) or GPU=0 (cpu), else maintained for a PYTHON=... of
# 3.13 or later, else the one installed in $(VENV), else cpu when a Python 3.12 or 3.11 works and
# maintained when only a 3.13 does (python3.13, or python3 being 3.13).
ifneq ($(filter command line environment override,$(origin VARIANT)),)
else ifneq ($(origin GPU),undefined)
VARIANT := $(if $(filter 1,$(GPU)),gpu,cpu)
else ifeq ($(if $(PYTHON),$(shell $(PYTHON) -c 'import sys; print(sys.version_info >= (3, 13))' \
  2>/dev/null)),True)
VARIANT := maintained
else ifneq ($(wildcard $(VENV)/.setup-gpu),)
VARIANT := gpu
else ifneq ($(wildcard $(VENV)/.setup-maintained),)
VARIANT := maintained
else ifneq ($(wildcard $(VENV)/.setup-cpu),)
VARIANT := cpu
else ifneq ($(origin PYTHON),undefined)
VARIANT := cpu
else
FOUND_PYTHON := $(call find_python,$(PYTHON_VERSIONS_cpu))
ifneq ($(FOUND_PYTHON),)
VARIANT := cpu
else
FOUND_PYTHON := $(or $(call find_python,3.13),$(shell p=$$(command -v python3) && \
  $$p -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null && echo $$p))
VARIANT := $(if $(FOUND_PYTHON),maintained,cpu)
endif
ifneq ($(FOUND_PYTHON),)
PYTHON := $(FOUND_PYTHON)
endif
endif
ifeq ($(filter $(VARIANT),$(VARIANTS)),)
$(error VARIANT=$(VARIANT): the variants are $(VARIANTS))
endif
GPU := $(if $(filter gpu,$(VARIANT)),1,0)

PYTHON_VERSIONS := $(PYTHON_VERSIONS_$(VARIANT))
# Why, and what else to do, in the error for a Python the variant does not accept.
PYTHON_WHY_cpu := the versions onnxruntime-training-cpu 1.19.2 has wheels for
PYTHON_WHY_gpu := the versions onnxruntime-training 1.19.2 has wheels for
PYTHON_WHY_maintained := the versions pyproject.toml accepts
PYTHON_ELSE_cpu := , or build the maintained variant, which trains without the training package, \
  on Python 3.13: `make setup VARIANT=maintained PYTHON=python3.13`
PYTHON_ELSE_gpu := $(PYTHON_ELSE_cpu)
# Without PYTHON=..., the newest accepted version found on PATH builds the environment.
PYTHON ?= $(firstword $(call find_python,$(PYTHON_VERSIONS)) $(shell command -v python3 2>/dev/null))
REQUIREMENTS := requirements/$(VARIANT).txt
STAMP := $(VENV)/.setup-$(VARIANT)

# Every package that provides the import name `onnxruntime`: only one may be installed.
RUNTIME_cpu := onnxruntime-training-cpu
RUNTIME_gpu := onnxruntime-training
RUNTIME_maintained := onnxruntime
RUNTIME_PACKAGES := onnxruntime-training onnxruntime-training-cpu onnxruntime onnxruntime-gpu

# The notebooks' metadata name this kernel; in the maintained variant its name says what it runs.
KERNEL_NAME := ort-training
KERNEL_DISPLAY_NAME := Python (ort-training$(if $(filter maintained,$(VARIANT)),$(comma) maintained onnxruntime))

# What make setup says once it has built $(VENV): the backend the optimizers train with, on what.
SAY_BACKEND := from helpers.doctor import backend_summary; print("backend:", backend_summary())

# The maintained onnxruntime beside a CPU or GPU $(VENV) (`make setup-maintained`): its own
# environment, on the newest Python that onnxruntime 1.31.1 has wheels for, found on PATH or among
# pyenv's versions (a pyenv shim that does not run is skipped), with the pins of the maintained
# variant. In the maintained variant, $(VENV) itself is that environment: make setup-maintained,
# make test and make fuzz use it, unless MAINTAINED_VENV=... names another.
ifeq ($(VARIANT),maintained)
MAINTAINED_VENV ?= $(VENV)
else
MAINTAINED_VENV ?= .venv-maintained
endif
# Whether $(VENV) is the maintained environment (then it has no rules of its own here).
MAINTAINED_IS_VENV := $(if $(filter $(abspath $(VENV)),$(abspath $(MAINTAINED_VENV))),1)
ifeq ($(MAINTAINED_IS_VENV),1)
ifneq ($(VARIANT),maintained)
$(error MAINTAINED_VENV=$(MAINTAINED_VENV) is $(VENV), whose variant is $(VARIANT): it may be \
  $(VENV) in the maintained variant only)
endif
endif
MAINTAINED_PY = $(MAINTAINED_VENV)/bin/python
MAINTAINED_PYTHON_VERSIONS := 3.14 3.13 3.12 3.11
MAINTAINED_PYTHON ?= $(firstword $(shell for v in $(MAINTAINED_PYTHON_VERSIONS); do \
  for p in $$(command -v python$$v) $$(command -v pyenv >/dev/null 2>&1 && \
      ls -d "$$(pyenv root)"/versions/$$v*/bin/python$$v 2>/dev/null | sort -V -r); do \
    $$p -c "" 2>/dev/null && { echo $$p; exit 0; }; done; done))
# Beside another variant, its stamp is not the maintained variant's (.setup-maintained): make setup
# VARIANT=maintained on that environment still installs helpers and registers the kernel
# $(KERNEL_NAME) there.
MAINTAINED_STAMP := $(if $(MAINTAINED_IS_VENV),$(STAMP),$(MAINTAINED_VENV)/.setup-beside)
MAINTAINED_KERNEL_NAME := ort-maintained
MAINTAINED_KERNEL_DISPLAY_NAME := Python (onnxruntime maintained)

# OpenVINO's onnxruntime (`make setup-openvino`), to train step models with its execution provider
# (benchmarks.studies.step_engines): onnxruntime-openvino 1.24.1, whose wheels are for Python 3.11,
# provides the import name `onnxruntime` too, so it has an environment of its own; numpy, onnx and
# protobuf at the CPU variant's pins; helpers importable by a .pth file, as in the maintained
# environment.
OPENVINO_VENV ?= .venv-openvino
OPENVINO_PY = $(OPENVINO_VENV)/bin/python
OPENVINO_PYTHON ?= $(firstword $(shell for p in $$(command -v python3.11) $$(command -v pyenv \
  >/dev/null 2>&1 && ls -d "$$(pyenv root)"/versions/3.11*/bin/python3.11 2>/dev/null | sort -V -r); do \
  $$p -c "" 2>/dev/null && { echo $$p; exit 0; }; done))
OPENVINO_RUNTIME := onnxruntime-openvino==1.24.1
OPENVINO_STAMP := $(OPENVINO_VENV)/.setup-openvino

# Benchmark grid: quick (default) or full, or a TOML file; extra runner options
GRID ?= quick
BENCH_ARGS ?=

# Model fuzzer: seeds (ranges and lists, e.g. 500-999 or 3,17), where the report goes
# (results/local/fuzz/ by default), seconds a training path may take before it is a hang
FUZZ_SEEDS ?= 0-499
FUZZ_REPORT ?=
FUZZ_TIME_LIMIT ?= 60
# The paths a model trains in (all by default): e.g. FUZZ_PATHS=built
FUZZ_PATHS ?=

# Extra options: make lab LAB_ARGS="--no-browser --port 8888", make test PYTEST_ARGS="-x -v"
LAB_ARGS ?=
PYTEST_ARGS ?=
# Jupyter refuses to run as root unless told to (containers, CI machines).
LAB_ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: help setup setup-maintained setup-openvino setup-web git-filter lab lint test test-unit test-notebooks fuzz bench docs docs-test doctor clean

help:
	@echo "Targets:"
	@echo "  setup   build $(VENV) from $(REQUIREMENTS), install helpers (editable),"
	@echo "          register the Jupyter kernel '$(KERNEL_NAME)', configure the git filter"
	@echo "          that strips notebook outputs at commit, say the backend it trains with."
	@echo "          VARIANT=cpu (onnxruntime-training-cpu 1.19.2, Python 3.12 or 3.11),"
	@echo "          VARIANT=gpu or GPU=1 (onnxruntime-training 1.19.2, CUDA 11.8, Python 3.11),"
	@echo "          VARIANT=maintained (onnxruntime 1.31.1, no training package: backend onnx,"
	@echo "          Python 3.13 to 3.11); by default the installed one, else cpu where Python"
	@echo "          3.12 or 3.11 is found, maintained where only 3.13 is (or PYTHON=... is 3.13)"
ifeq ($(MAINTAINED_IS_VENV),1)
	@echo "  setup-maintained  make setup: in the maintained variant, $(VENV) is the environment of the"
	@echo "          maintained onnxruntime that make test and make fuzz use"
else
	@echo "  setup-maintained  build $(MAINTAINED_VENV): the maintained onnxruntime (1.31.1, no"
	@echo "          training module) on the newest Python it has wheels for, with the pins of"
	@echo "          requirements/maintained.txt, helpers importable (build_training_step, the runner),"
	@echo "          the Jupyter kernel '$(MAINTAINED_KERNEL_DISPLAY_NAME)' (in $(VENV) too)"
endif
	@echo "  setup-openvino  build $(OPENVINO_VENV): onnxruntime-openvino 1.24.1 (OpenVINO's execution"
	@echo "          provider) on Python 3.11, numpy and onnx at the pins, helpers importable"
	@echo "  setup-web  npm install onnxruntime-web into helpers/portable/web (the browser's"
	@echo "          runtime, under Node): the tests then train a step model with it too"
	@echo "  lab     start JupyterLab on notebooks/ (LAB_ARGS=... passes options)"
	@echo "  lint    ruff: the linter and the formatter's check (100 characters, notebooks 88)"
	@echo "  test    unit tests (tests/) and the docstring examples of helpers, the portable"
	@echo "          tests again in $(MAINTAINED_VENV), then every notebook with nbval --nbval-lax"
	@echo "          and with papermill from the repository's root, the notebooks that run on the"
	@echo "          maintained onnxruntime again on its kernel, then make docs-test"
	@echo "          (PYTEST_ARGS=... passes options to the pytest runs); its parts alone:"
	@echo "          make test-unit, make test-notebooks, make docs-test"
	@echo "  fuzz    random small torch models (seeds FUZZ_SEEDS=$(FUZZ_SEEDS)), each trained in both"
	@echo "          optimizers and OrtTorchModule on both backends (backend onnx in $(MAINTAINED_VENV))"
	@echo "          and the step models (FUZZ_PATHS=built: one path) in a child process, compared"
	@echo "          with torch; a table of outcomes, a report in results/local/fuzz (FUZZ_REPORT=..."
	@echo "          elsewhere), exit 1 on any failure; FUZZ_TIME_LIMIT=$(FUZZ_TIME_LIMIT) seconds a path"
	@echo "  bench   run the benchmark sweep into results/local (GRID=quick by default,"
	@echo "          GRID=full for the reference grid; BENCH_ARGS=... passes options to"
	@echo "          python -m benchmarks, e.g. \"--jobs 2\" or \"--scheduler tcp://HOST:8786\")"
	@echo "  docs    build the documentation site into docs/_build/html (notebooks run, cached)"
	@echo "  docs-test  quick site build, then headless Chromium opens its pages"
	@echo "  doctor  what this machine trains on: the runtime package, the backend, a training step"
	@echo "          on the CPU and on each GPU (or why not), the NVIDIA driver, the CUDA libraries,"
	@echo "          torch"
	@echo "  clean   remove $(VENV), build artefacts, test caches and notebook checkpoints"
	@echo "  help    this list"
	@echo "Variables: VENV=$(VENV) VARIANT=$(VARIANT) PYTHON=$(PYTHON) (Python $(PYTHON_VERSIONS) accepted)"

setup: $(STAMP) git-filter

# Notebooks are committed without outputs: .gitattributes names the filter,
# this configures it for this clone (git ignores it where it is not configured).
git-filter: | $(STAMP)
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	  git config filter.nbstripout.clean "'$(abspath $(PY))' -m nbstripout --keep-id"; \
	  git config filter.nbstripout.smudge cat; \
	  git config diff.ipynb.textconv "'$(abspath $(PY))' -m nbstripout -t"; \
	  echo "git filter nbstripout configured: notebook outputs are stripped at commit"; \
	fi

$(PY):
	@if [ -z "$(PYTHON)" ]; then echo "error: no Python on PATH; install Python $(firstword $(PYTHON_VERSIONS)) (for example: uv python install $(firstword $(PYTHON_VERSIONS)))" >&2; exit 1; fi
	@$(PYTHON) -c 'import sys; v = "%d.%d" % sys.version_info[:2]; ok = "$(PYTHON_VERSIONS)".split(); sys.exit(0 if v in ok else "error: the $(VARIANT) variant needs Python " + " or ".join(ok) + " ($(PYTHON_WHY_$(VARIANT))); $(PYTHON) is " + v + ". Get one with `uv python install $(firstword $(PYTHON_VERSIONS))` and run `make setup PYTHON=$$(uv python find $(firstword $(PYTHON_VERSIONS)))`$(if $(filter maintained,$(VARIANT)),,$(comma) or use conda: `conda env create -f environment.yml`)$(PYTHON_ELSE_$(VARIANT)).")'
	@if command -v uv >/dev/null 2>&1; then \
	  echo "uv venv --seed --python $(PYTHON) $(VENV)"; uv venv --seed --python $(PYTHON) $(VENV); \
	else \
	  echo "$(PYTHON) -m venv $(VENV)"; $(PYTHON) -m venv $(VENV); \
	fi

# The stamp records which variant is installed; it is rebuilt when a pin or pyproject.toml changes.
$(STAMP): requirements/base.txt $(REQUIREMENTS) pyproject.toml | $(PY)
	@if [ "$(origin PYTHON)" = "command line" ]; then \
	  want=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	  have=$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	  if [ "$$want" != "$$have" ]; then \
	    echo "error: $(VENV) runs Python $$have, PYTHON=$(PYTHON) is $$want: remove $(VENV) (rm -rf $(VENV)) to build it on $$want" >&2; \
	    exit 1; \
	  fi; \
	fi
	@if [ "$(VARIANT)" = gpu ] && [ "$$(uname -sm)" != "Linux x86_64" ]; then \
	  echo "error: the GPU package onnxruntime-training==1.19.2 and its CUDA 11.8 libraries exist for" >&2; \
	  echo "Linux x86-64 only, not $$(uname -sm). Use the CPU variant: make setup GPU=0" >&2; exit 1; \
	fi
	$(PY) -m pip install --upgrade pip
	@installed=$$($(PY) -m pip list --format=freeze 2>/dev/null | grep -i '^onnxruntime' | cut -d= -f1 | tr 'A-Z_' 'a-z-'); \
	if [ -n "$$installed" ] && [ "$$installed" != "$(RUNTIME_$(VARIANT))" ]; then \
	  echo "Found $$(echo $$installed), need only $(RUNTIME_$(VARIANT)): uninstalling every onnxruntime package first"; \
	  echo "$(PY) -m pip uninstall -y $(RUNTIME_PACKAGES)"; \
	  $(PY) -m pip uninstall -y $(RUNTIME_PACKAGES); \
	fi
	@if [ "$(VARIANT)" != gpu ]; then \
	  cu11=$$($(PY) -m pip list --format=freeze 2>/dev/null | grep -i '^nvidia-.*-cu11==' | cut -d= -f1 | tr '\n' ' '); \
	  if [ -n "$$cu11" ]; then \
	    echo "Removing the GPU variant's CUDA 11.8 libraries (2.1 GB): $(PY) -m pip uninstall -y $$cu11"; \
	    $(PY) -m pip uninstall -y $$cu11; \
	  fi; \
	fi
	rm -f $(VENV)/.setup-cpu $(VENV)/.setup-gpu $(VENV)/.setup-maintained
	$(PY) -m pip install -r $(REQUIREMENTS)
	$(PY) -m pip install --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "$(KERNEL_DISPLAY_NAME)"
	@$(PY) -c '$(SAY_BACKEND)'
	touch $@

# helpers is not pip-installed in .venv-maintained (it may run Python 3.14, which pyproject.toml's
# requires-python leaves out, and requirements/maintained.txt pins what it needs): a .pth file puts
# this folder on its sys.path. The kernel is registered in both environments, so that `make lab`
# offers it. In the maintained variant, $(VENV) is that environment: make setup builds it.
ifneq ($(MAINTAINED_IS_VENV),1)
$(MAINTAINED_PY):
	@if [ -z "$(MAINTAINED_PYTHON)" ]; then echo "error: no Python $(MAINTAINED_PYTHON_VERSIONS) found (onnxruntime 1.31.1 has wheels for those); install one (for example: uv python install 3.13) or give MAINTAINED_PYTHON=/path/to/python3.13" >&2; exit 1; fi
	@$(MAINTAINED_PYTHON) -c 'import sys; v = "%d.%d" % sys.version_info[:2]; ok = "$(MAINTAINED_PYTHON_VERSIONS)".split(); sys.exit(0 if v in ok else "error: the maintained onnxruntime needs Python " + " or ".join(ok) + "; $(MAINTAINED_PYTHON) is " + v)'
	$(MAINTAINED_PYTHON) -m venv $(MAINTAINED_VENV)

$(MAINTAINED_STAMP): requirements/base.txt requirements/maintained.txt | $(MAINTAINED_PY)
	$(MAINTAINED_PY) -m pip install -r requirements/maintained.txt
	$(MAINTAINED_PY) -c 'import os, sysconfig; open(os.path.join(sysconfig.get_paths()["purelib"], "ort_training_notebooks.pth"), "w").write(os.getcwd() + "\n")'
	$(MAINTAINED_PY) -c 'import helpers.portable.trainer, onnxruntime; from helpers import build_training_step, export_for_training; print("helpers.portable on onnxruntime", onnxruntime.__version__)'
	$(MAINTAINED_PY) -m ipykernel install --sys-prefix --name $(MAINTAINED_KERNEL_NAME) --display-name "$(MAINTAINED_KERNEL_DISPLAY_NAME)"
	touch $@
endif

$(OPENVINO_PY):
	@if [ -z "$(OPENVINO_PYTHON)" ]; then echo "error: no Python 3.11 found (onnxruntime-openvino 1.24.1 has wheels for it only); install one (for example: uv python install 3.11) or give OPENVINO_PYTHON=/path/to/python3.11" >&2; exit 1; fi
	@$(OPENVINO_PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "error: onnxruntime-openvino 1.24.1 needs Python 3.11; $(OPENVINO_PYTHON) is %d.%d" % sys.version_info[:2])'
	$(OPENVINO_PYTHON) -m venv $(OPENVINO_VENV)

$(OPENVINO_STAMP): requirements/base.txt requirements/cpu.txt | $(OPENVINO_PY)
	$(OPENVINO_PY) -m pip install $(OPENVINO_RUNTIME) $$(grep -hE '^(numpy|onnx|protobuf)==' requirements/base.txt requirements/cpu.txt)
	$(OPENVINO_PY) -c 'import os, sysconfig; open(os.path.join(sysconfig.get_paths()["purelib"], "ort_training_notebooks.pth"), "w").write(os.getcwd() + "\n")'
	$(OPENVINO_PY) -c 'import helpers.portable.trainer, onnxruntime as ort; assert "OpenVINOExecutionProvider" in ort.get_available_providers(); print("helpers.portable on onnxruntime", ort.__version__, "with OpenVINO")'
	touch $@

setup-openvino: $(OPENVINO_STAMP)

# onnxruntime-web (pinned in helpers/portable/web/package.json and its lock file), for the test
# that trains a step model with the runtime a browser runs; needs node and npm.
WEB_DIR := helpers/portable/web
setup-web: $(WEB_DIR)/node_modules/.package-lock.json

$(WEB_DIR)/node_modules/.package-lock.json: $(WEB_DIR)/package.json $(WEB_DIR)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "error: npm is missing: install Node.js (apt-get install nodejs npm)" >&2; exit 1; }
	cd $(WEB_DIR) && npm ci --no-audit --no-fund
	touch $@

setup-maintained: $(MAINTAINED_STAMP)
	@if [ "$(MAINTAINED_IS_VENV)" = 1 ]; then \
	  echo "$(VENV) holds the maintained variant: it is the maintained environment (MAINTAINED_VENV=$(MAINTAINED_VENV))"; \
	elif [ -d "$(VENV)" ]; then \
	  echo "$(MAINTAINED_PY) -m ipykernel install --prefix $(VENV) --name $(MAINTAINED_KERNEL_NAME)"; \
	  $(MAINTAINED_PY) -m ipykernel install --prefix "$(abspath $(VENV))" --name $(MAINTAINED_KERNEL_NAME) --display-name "$(MAINTAINED_KERNEL_DISPLAY_NAME)" >/dev/null; \
	else \
	  echo "note: $(VENV) does not exist yet: run make setup-maintained again after make setup, so that make lab offers the kernel"; \
	fi

doctor: setup
	$(PY) -m helpers.doctor --variant $(VARIANT)

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(LAB_ROOT_ARG) $(LAB_ARGS)

# Two pytest runs, so that each fails on its own when it collects nothing
# (pytest exit code 5): a notebook run that finds no notebook is an error.
# Style: ruff's linter and formatter (pyproject.toml: 100 characters), the notebooks at 88.
NOTEBOOKS_CODE := notebooks/*.ipynb benchmarks/*.ipynb
lint: setup
	$(VENV)/bin/ruff check --extend-exclude "*.ipynb" .
	$(VENV)/bin/ruff format --extend-exclude "*.ipynb" --check .
	$(VENV)/bin/ruff check --line-length 88 $(NOTEBOOKS_CODE)
	$(VENV)/bin/ruff format --line-length 88 --check $(NOTEBOOKS_CODE)

# make test is three targets, which CI can also run apart: the unit tests and docstring examples,
# the notebooks, the site. The portable tests run a second time in the maintained environment
# (not when $(VENV) is that environment); --confcutdir keeps tests/conftest.py (scikit-learn, the
# optimizers) out of that run.
test: test-unit test-notebooks docs-test

test-unit: setup setup-maintained
	MPLBACKEND=Agg $(PY) -m pytest $(PYTEST_ARGS) --doctest-modules helpers tests
ifneq ($(MAINTAINED_IS_VENV),1)
	@echo "$(MAINTAINED_PY) -m pytest $(PYTEST_ARGS) -p no:cacheprovider --confcutdir=tests/portable --doctest-modules helpers/portable tests/portable"; \
	$(MAINTAINED_PY) -m pytest $(PYTEST_ARGS) -p no:cacheprovider --confcutdir=tests/portable --doctest-modules helpers/portable tests/portable; \
	status=$$?; \
	if [ $$status -eq 5 ]; then echo "error: the maintained run collected no test under tests/portable" >&2; fi; \
	exit $$status
endif

# Every notebook twice: with nbval on the kernel of $(VENV), from its own folder as JupyterLab
# runs it, then with papermill from the repository's root (tests/notebooks_from_root.py). That
# second run takes the maintained onnxruntime's kernel for the notebooks whose first cell does not
# say they need onnxruntime-training 1.19.2 (helpers.teaching.learning_path lists them). In the
# maintained variant, the kernel of $(VENV) is the maintained one, and only those notebooks run.
test-notebooks: setup setup-maintained
	@notebooks=$$($(PY) -m helpers.teaching.learning_path --maintained) && [ -n "$$notebooks" ] \
	  || { echo "error: no notebook listed for the maintained kernel" >&2; exit 1; }; \
	here=$$(if [ "$(MAINTAINED_IS_VENV)" = 1 ]; then echo $$notebooks; else echo notebooks; fi); \
	maintained=$(if $(MAINTAINED_IS_VENV),$(KERNEL_NAME),$(MAINTAINED_KERNEL_NAME)); \
	echo "MAINTAINED_NOTEBOOK_KERNEL=$$maintained MPLBACKEND=Agg $(PY) -m pytest $(PYTEST_ARGS) --nbval-lax --nbval-kernel-name $(KERNEL_NAME)" $$here tests/notebooks_from_root.py; \
	MAINTAINED_NOTEBOOK_KERNEL=$$maintained MPLBACKEND=Agg $(PY) -m pytest $(PYTEST_ARGS) --nbval-lax --nbval-kernel-name $(KERNEL_NAME) $$here tests/notebooks_from_root.py; \
	status=$$?; \
	if [ $$status -eq 5 ]; then echo "error: nbval collected no notebook under notebooks/" >&2; fi; \
	exit $$status

DOCS_STAMP := $(VENV)/.setup-docs
SPHINX := $(VENV)/bin/sphinx-build -W --keep-going -b html docs

# Sphinx and myst-nb in the same environment; Chromium (Debian's package)
# for the site test, installed when missing and root can install it.
$(DOCS_STAMP): requirements/docs.txt $(STAMP)
	$(PY) -m pip install -r requirements/docs.txt
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else \
	    echo "warning: chromium is missing; make docs-test needs it: sudo apt-get install chromium" >&2; \
	  fi; \
	fi
	touch $@

docs: setup $(DOCS_STAMP)
	$(SPHINX) docs/_build/html
	@echo "open docs/_build/html/index.html"

docs-test: setup $(DOCS_STAMP)
	DOCS_QUICK=1 $(SPHINX) docs/_build/quick
	DOCS_SITE=docs/_build/quick $(PY) -m pytest -p no:cacheprovider docs/test_site_*.py

# Two workers: each runs models in child processes, so that an abort or a hang is reported.
fuzz: setup setup-maintained
	PORTABLE_PYTHON=$${PORTABLE_PYTHON:-$(abspath $(MAINTAINED_PY))} \
	PYTHONPATH=tests$${PYTHONPATH:+:$$PYTHONPATH} $(PY) -m model_fuzz --seeds $(FUZZ_SEEDS) --jobs 2 \
	  --time-limit $(FUZZ_TIME_LIMIT) $(if $(FUZZ_REPORT),--report $(FUZZ_REPORT)) \
	  $(if $(FUZZ_PATHS),--paths $(FUZZ_PATHS))

# Executed benchmark notebooks keep their plots: no MPLBACKEND here. Sweeps go to
# results/local; only `BENCH_ARGS="--results results/reference"` (with GRID=full)
# writes the committed reference (results/README.md).
bench: setup
	$(PY) -m benchmarks --grid $(GRID) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(MAINTAINED_VENV) $(if $(MAINTAINED_IS_VENV),.venv-maintained) $(OPENVINO_VENV) $(WEB_DIR)/node_modules build dist *.egg-info .pytest_cache
	find . \( -name .git -o -name .venv -o -path './$(VENV)' \) -prune -o \
	  -type d \( -name __pycache__ -o -name .ipynb_checkpoints -o -name .pytest_cache \) -prune \
	  -exec rm -rf {} +
