# Rootline: `make run` (demo on http://127.0.0.1:8000) and `make test` (the whole suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
PORT ?= 8000

.PHONY: run test lint serve bench-ingest clean

$(INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(INSTALLED)

run: $(INSTALLED)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py demo --url http://127.0.0.1:$(PORT)
	$(BIN)/python manage.py runserver 127.0.0.1:$(PORT) --noreload

test: $(INSTALLED)
	$(BIN)/python -m pytest

# The house rules CI runs before the tests: ruff's lint and format, and mypy over the project.
lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

serve: $(INSTALLED)
	$(BIN)/python manage.py migrate --noinput
	PORT=$(PORT) BIN=$(BIN) bash bin/serve

clean:
	rm -rf $(VENV) var rootline.egg-info .pytest_cache
