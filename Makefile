# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow bench clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Stamp files record which extras are installed, so a changed pyproject.toml reinstalls.
$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(VENV)/.installed $@

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $(VENV)/.installed $(VENV)/.installed-test $@

# The main job, sizing (about 30 s here), then one deployment predicted against simulated.
# examples/ensemble_case_study.py (the ensemble explained stage by stage) runs on its own.
demo: $(VENV)/.installed
	$(BIN)/python examples/size_case_study.py --out demo-out
	$(BIN)/python examples/demo.py --out demo-out

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

test-slow: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -m slow

bench: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/sim_speed.py
	$(BIN)/python benchmarks/predict_speed.py
	$(BIN)/python benchmarks/size_speed.py

clean:
	rm -rf $(VENV) demo-out .pytest_cache
