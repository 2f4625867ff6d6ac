# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv if missing and
# installs once; a stamp file per extra set makes a second run skip the install (it redoes it only
# when pyproject.toml changes).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# llama-cpp-python's server (a real OpenAI-compatible inference server for the LLM tests) pins its own
# fastapi, so it lives in its own venv; it compiles llama.cpp (~6 min on 2 cores, once).
LLAMA  := .venv-llama
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test install install-dev llama-server clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,models]'
	touch $@ $(VENV)/.installed-core

$(LLAMA)/.installed:
	$(PYTHON) -m venv $(LLAMA)
	$(LLAMA)/bin/pip install -q 'llama-cpp-python[server]==0.3.36'
	touch $@

install: $(VENV)/.installed-core
install-dev: $(VENV)/.installed-dev
llama-server: $(LLAMA)/.installed

demo: $(VENV)/.installed-core
	$(BIN)/perceptforge demo

test: $(VENV)/.installed-dev $(LLAMA)/.installed
	$(BIN)/python -m pytest

clean-venv:
	rm -rf $(VENV) $(LLAMA)
