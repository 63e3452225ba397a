.PHONY: serve test check lint install

serve:  ## serve on 127.0.0.1:8000 (or PORT) with embedded SQLite
	scripts/serve $(if $(PORT),--port $(PORT))

test:  ## run every test (SQLite, PostgreSQL, Redis)
	scripts/test

check:  ## format check, ruff, mypy --strict, import contracts
	scripts/check

lint:
	scripts/lint

install:
	scripts/install
