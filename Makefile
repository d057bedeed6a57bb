# The two commands a newcomer needs; both run the idempotent bootstrap first.
.PHONY: demo test bootstrap bench
bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	.venv/bin/mbforge demo

# One test worker per core (pytest-xdist); a test file stays on one worker, so its module
# fixtures are built once. `.venv/bin/python -m pytest FILE` runs serially.
test: bootstrap
	.venv/bin/python -m pytest -n auto --dist loadfile

bench: bootstrap
	.venv/bin/python -m bench
