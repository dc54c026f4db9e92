# The two commands in the README do all set-up on a fresh Debian machine with Python 3.11.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean system-deps kafka-jars

# pip builds the C record decoder (setup.py) into the source tree: a changed C file installs again
$(STAMP): pyproject.toml setup.py src/groupstream/protocol/records/_crecords.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

# kcat (a peer of the compatibility tests) and chromium (the console's browser tests), from Debian when missing
system-deps:
	@missing=""; command -v kcat >/dev/null 2>&1 || missing="kcat"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	[ -z "$$missing" ] || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; else SUDO=none; fi; \
	  if [ "$$SUDO" != none ] && command -v apt-get >/dev/null 2>&1; then \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	  else echo "$$missing missing and apt is not usable: install them to run the tests that use them" >&2; exit 1; fi; }

# Apache Kafka for the broker_apache tests: the jars of tests/apache/pom.xml (kafka_2.13 and kafka-tools with
# their runtime dependencies) copied by Maven into ~/.cache/groupstream, never into the work tree; a second run
# only checks that they are there. Maven is a Debian package; it is installed when missing and apt is usable.
kafka-jars: $(STAMP)
	@command -v mvn >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; else SUDO=none; fi; \
	  if [ "$$SUDO" != none ] && command -v apt-get >/dev/null 2>&1; then \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq maven >/dev/null; \
	  else echo "mvn is missing and apt is not usable: install Maven to fetch Apache Kafka for its tests" >&2; exit 1; fi; }
	$(BIN)/python tests/support/apache_kafka.py fetch

demo: $(STAMP)
	$(BIN)/groupstream demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

test: $(STAMP) system-deps kafka-jars lint
	$(BIN)/python -m pytest -q --brokers=groupstream,apache tests

bench: $(STAMP)
	$(BIN)/python bench/broker_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
