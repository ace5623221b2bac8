# The two entries of README and CI: make test (the suite of every module)
# and make check (formatting and static checks). scripts/ says how.

# TESTFLAGS: more go test flags, e.g. make test TESTFLAGS="-run Lock -count=1".
TESTFLAGS ?=

.PHONY: test test-short check

test:
	scripts/test $(TESTFLAGS)

test-short:
	scripts/test -short $(TESTFLAGS)

check:
	scripts/check
