.PHONY: serve test check lint install install-runtime

serve:  ## serve on 127.0.0.1:8000 (or PORT) with embedded SQLite; installs the runtime only
	scripts/serve $(if $(PORT),--port $(PORT))

test:  ## run every test (SQLite, PostgreSQL, Redis); installs the development tools too
	scripts/test

check:  ## format check, ruff, mypy --strict, import contracts
	scripts/check

lint:
	scripts/lint

install:  ## .venv with the development tools (install-runtime: without them)
	scripts/install

install-runtime:
	scripts/install --runtime
