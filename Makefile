# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo flash-sale test test-slow bench triton clean

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

# The main job, sizing for 1,000-10,000 req/s beside the peak's plan (about a minute here),
# then one deployment predicted against simulated. examples/ensemble_case_study.py (the
# ensemble explained stage by stage) runs on its own.
demo: $(VENV)/.installed
	$(BIN)/python examples/size_case_study.py --out demo-out
	$(BIN)/python examples/demo.py --out demo-out

# The case study through a two-hour flash sale: the static plan against an autoscaled one,
# every request simulated (a few minutes here); demo-out/flash_sale/flash_sale.png.
flash-sale: $(VENV)/.installed
	$(BIN)/python examples/flash_sale.py --out demo-out

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

test-slow: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -m slow

bench: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/sim_speed.py
	$(BIN)/python benchmarks/predict_speed.py
	$(BIN)/python benchmarks/size_speed.py

# A real Triton 2.51 server and perf_analyzer 2.50 for qmodel triton-check and the slow tests
# (docs/triton-server.md): the two pinned wheels unpacked into .venv/triton-dist (about 400 MB
# downloaded), where qmodel.triton.server finds them.
TRITON_DIST := $(VENV)/triton-dist
triton: $(TRITON_DIST)/.unpacked

$(TRITON_DIST)/.unpacked: | $(VENV)/.installed-test
	rm -rf $(TRITON_DIST) && mkdir -p $(TRITON_DIST)/wheels $(TRITON_DIST)/bin $(TRITON_DIST)/lib
	$(BIN)/python -m pip download --quiet --no-deps nvidia-pytriton==0.7.0 -d $(TRITON_DIST)/wheels
	$(BIN)/python -m pip download --quiet --no-deps tritonclient==2.50.0 \
	    --platform manylinux1_x86_64 --only-binary=:all: -d $(TRITON_DIST)/wheels
	cd $(TRITON_DIST) && unzip -q wheels/nvidia_pytriton-0.7.0-*.whl 'pytriton/tritonserver/*' \
	    'nvidia_pytriton.libs/*' && unzip -q -j wheels/tritonclient-2.50.0-*.whl \
	    '*/bin/perf_analyzer' -d bin && chmod +x bin/perf_analyzer \
	    pytriton/tritonserver/bin/tritonserver \
	    pytriton/tritonserver/python_backend_stubs/*/triton_python_backend_stub && \
	    ln -sf $$PWD/nvidia_pytriton.libs/libb64-*.so.0d lib/libb64.so.0d && \
	    ln -sf $$(ls $$PWD/nvidia_pytriton.libs/libcudart-*.so.12* | head -1) lib/libcudart.so.12
	rm -rf $(TRITON_DIST)/wheels
	touch $@

clean:
	rm -rf $(VENV) demo-out .pytest_cache
