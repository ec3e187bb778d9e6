# Tutti: `make demo` and `make test` install what is missing, build, and run.
SHELL := /bin/bash
APT_PACKAGES := libavformat-dev libavcodec-dev libavutil-dev libswresample-dev libsoxr-dev libasound2-dev pkg-config ffmpeg
SWIFT_BUILD_FLAGS ?=
DEMO_DIR ?= out/demo

.PHONY: deps build release test demo bench clean

# Installs the Debian packages that are not there yet (needs root or sudo).
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing: $$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	swift build $(SWIFT_BUILD_FLAGS)

release: deps
	swift build -c release $(SWIFT_BUILD_FLAGS)

test: deps
	swift build --build-tests $(SWIFT_BUILD_FLAGS)
	swift test --skip-build $(SWIFT_BUILD_FLAGS)

# Plays a generated demo tune gaplessly as a 3-track queue on the default output
# (a virtual sound card when the machine has none), then checks the result.
demo: build
	@mkdir -p $(DEMO_DIR)
	@bash scripts/make-demo-tune.sh $(DEMO_DIR)
	.build/debug/tutti info $(DEMO_DIR)/tune-1.flac $(DEMO_DIR)/tune-2.mp3 $(DEMO_DIR)/tune-3.opus
	cd $(DEMO_DIR) && ../../.build/debug/tutti play tune-1.flac tune-2.mp3 tune-3.opus
	@ls -l $(DEMO_DIR)/tutti-virtual.wav 2>/dev/null && echo "Played to $(DEMO_DIR)/tutti-virtual.wav (timing in tutti-virtual.wav.timing.jsonl)" || true

bench: deps
	swift run -c release tutti-bench decode

clean:
	rm -rf .build out
