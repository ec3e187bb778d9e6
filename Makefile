# Tutti: `make demo` and `make test` install what is missing, build, and run.
SHELL := /bin/bash
APT_PACKAGES := libavformat-dev libavcodec-dev libavutil-dev libswresample-dev libsoxr-dev libogg-dev libasound2-dev pkg-config ffmpeg
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

# Tests run in parallel, except the multi-room end-to-end test: it runs a house and three
# real-time speaker processes and measures what their sound cards emitted, so it gets the machine
# to itself rather than compete with forty suites for two cores.
SOLO_TESTS := MultiRoomEndToEndTests
test: deps
	swift build --build-tests $(SWIFT_BUILD_FLAGS)
	swift test --skip-build --skip '$(SOLO_TESTS)' $(SWIFT_BUILD_FLAGS)
	swift test --skip-build --filter '$(SOLO_TESTS)' $(SWIFT_BUILD_FLAGS)

# The main job: a house server and three virtual rooms (separate processes, each with its own
# skewed clock and drifting sound card) play a generated demo tune — a three-track gapless queue
# in FLAC, MP3 and Opus — in sync; then the sound cards' output is analysed into a sync report.
# Built in release mode: real-time audio in four processes wants optimized code.
demo: release
	@mkdir -p $(DEMO_DIR)
	@bash scripts/make-demo-tune.sh $(DEMO_DIR)
	.build/release/tutti info $(DEMO_DIR)/tune-1.flac $(DEMO_DIR)/tune-2.mp3 $(DEMO_DIR)/tune-3.opus
	.build/release/tutti-bench sync --speakers 3 --files $(DEMO_DIR)/tune-1.flac $(DEMO_DIR)/tune-2.mp3 $(DEMO_DIR)/tune-3.opus \
		--delay-ms 0.5 --jitter-ms 0.5 --outage-for 0 --warmup 8 --tutti .build/release/tutti --work-dir $(DEMO_DIR)/rooms

bench: deps
	swift build -c release
	.build/release/tutti-bench decode
	.build/release/tutti-bench sync

clean:
	rm -rf .build out
