# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv if missing and
# installs once; a stamp file per extra set makes a second run skip the install (it redoes it only
# when pyproject.toml changes).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test install install-dev clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,models]'
	touch $@ $(VENV)/.installed-core

install: $(VENV)/.installed-core
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed-core
	$(BIN)/perceptforge demo

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

clean-venv:
	rm -rf $(VENV)
