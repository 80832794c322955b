# The `reconciler` command as a container image: built with the official Swift image, the Swift
# runtime (standard library, Foundation) linked statically, run on Debian slim as a non-root user.
#
#   docker build -t ghcr.io/example/app-store-reconciler:1.0.0 .
#   docker run --rm ghcr.io/example/app-store-reconciler:1.0.0 run --help
#
# How to run it (environment, the .p8 key as a mounted file): jobs/deploy/README.md. CI lints this
# file with hadolint (jobs/dev/check-deploy); the project's machines have no container engine, so
# the image itself is not built there.

# ---- build ----------------------------------------------------------------------------------
# bookworm, like the runtime stage below: the binary links the same glibc it runs with.
FROM swift:6.3-bookworm AS build
WORKDIR /build

# zlib's headers: stored payloads are kept deflated (the CZlib system library target). The Swift
# image usually has them already; installed so the build does not depend on that.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*

# Dependencies first, in their own layer: rebuilt only when Package.swift changes. There is no
# Package.resolved in the context (it is not in git either), so versions resolve from the
# ranges in Package.swift, as they do for a fresh clone.
COPY Package.swift ./
RUN swift package resolve

# Only what the build reads (.dockerignore keeps the rest out). SwiftPM needs every declared
# target's directory, test targets included, to load the package, so Tests/ comes too (without
# its fixtures: SwiftPM warns that the excluded Fixtures folder is missing, which is harmless).
# The build-tool plugins (Plugins/) run while it builds; one embeds migrations/ into the binary.
COPY Plugins ./Plugins
COPY migrations ./migrations
COPY Sources ./Sources
COPY Tests ./Tests

# --static-swift-stdlib: the Swift runtime and Foundation are linked in, so the runtime stage
# needs no Swift libraries. Only `reconciler` is built (not the mock or the benchmark).
# The crash backtracer (swift-backtrace-static) comes along so a crash logs a symbolicated trace.
RUN swift build -c release --static-swift-stdlib --product reconciler \
    && mkdir -p /staging \
    && cp "$(swift build -c release --show-bin-path)/reconciler" /staging/reconciler \
    && cp /usr/libexec/swift/linux/swift-backtrace-static /staging/swift-backtrace-static

# ---- run ------------------------------------------------------------------------------------
FROM debian:bookworm-slim

ARG VERSION=1.0.0
LABEL org.opencontainers.image.title="app-store-reconciler" \
      org.opencontainers.image.description="Brings in-app-purchase records in PostgreSQL back in line with the App Store after a webhook outage (reconciler run, serve, migrate, ...)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"

# What the statically linked binary still needs at run time:
# - ca-certificates: TLS to Apple's API and PostgreSQL's sslmode=verify-ca/verify-full use the
#   system trust store (/etc/ssl/certs). Apple's signing root is bundled in the binary instead.
# - tzdata: time zone names for Foundation (the tool works in UTC; this keeps TZ meaningful).
# - libstdc++6, libgcc-s1, zlib1g: linked dynamically even with --static-swift-stdlib (the Swift
#   runtime's C++ support; zlib for stored payloads, deflated, and HTTP compression). Already in the slim
#   base; listed so that stays true. No libcurl or libxml2: FoundationNetworking and
#   FoundationXML are not linked.
# Versions are not pinned: Debian's bookworm archive keeps only the current version of each
# package, so a pinned version stops installing at the next point release or security update.
# The base image tag fixes the release; rebuild to pick up security fixes.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates tzdata libstdc++6 libgcc-s1 zlib1g \
    && rm -rf /var/lib/apt/lists/*

# A fixed uid/gid (65532, the usual "nonroot" id) so Kubernetes' runAsUser/fsGroup and file
# ownership on mounted volumes can name it. No home directory, no login shell.
RUN groupadd --system --gid 65532 reconciler \
    && useradd --system --uid 65532 --gid reconciler --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin reconciler

COPY --from=build /staging/reconciler /usr/local/bin/reconciler
COPY --from=build /staging/swift-backtrace-static /usr/local/libexec/swift-backtrace-static

# On a crash, print a backtrace to stderr (no interactive debugger; paths sanitized).
ENV SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=all,interactive=no,swift-backtrace=/usr/local/libexec/swift-backtrace-static

# Numeric, so runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532

# `reconciler serve` listens here by default (--port or PORT change it).
EXPOSE 8080

# The image is the CLI: arguments are a command, e.g. `run --since-last`, `serve`, `migrate`.
ENTRYPOINT ["reconciler"]
CMD ["--help"]
