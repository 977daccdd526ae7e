# syntax=docker/dockerfile:1
#
# Switchyard's image, for those with Docker (BuildKit), podman or buildah:
#
#   docker build -t ghcr.io/switchyard-dev/switchyard:dev \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker buildx build --platform linux/amd64,linux/arm64 ...   # both architectures
#
# `make image` builds the same image without a container engine
# (tools/ociimage, from scratch): the same binaries, built the same way, at
# the same paths, with the same user, entrypoint, working directory,
# environment and labels; internal/imagetest checks that this file and that
# image agree, so change both together. The one difference is the base:
# distroless also has time zones, os-release and the users root and nobody,
# and its CA bundle is Debian's, where make image's is Mozilla's from
# golang.org/x/crypto/x509roots/fallback.
#
# The root filesystem can be mounted read-only (readOnlyRootFilesystem):
# the services write nothing but /tmp (mount an emptyDir there) and the
# directories their flags name (the gateway's --usage-spool-dir).

# The toolchain; go.mod names the minimum.
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
# Stamped into the binaries as `make build` does (internal/version); empty:
# the binaries say what Go's build info knows.
ARG VERSION=
ARG COMMIT=
WORKDIR /src
# The modules first: a change of source does not download them again.
COPY go.mod go.sum go.work go.work.sum ./
COPY loadtest/go.mod loadtest/go.sum ./loadtest/
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-X github.com/switchyard-dev/switchyard/internal/version.version=${VERSION} -X github.com/switchyard-dev/switchyard/internal/version.commit=${COMMIT}" \
      -o /out/ ./cmd/switchyard ./cmd/yardctl

# The binaries are static: they need CA certificates, an /etc/passwd naming
# nonroot (65532) and a /tmp (1777), and nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=
ARG COMMIT=
LABEL org.opencontainers.image.title="switchyard" \
      org.opencontainers.image.description="Switchyard: an inference control plane (switchyard, one subcommand per service, and yardctl)" \
      org.opencontainers.image.source="https://github.com/switchyard-dev/switchyard" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/switchyard /out/yardctl /usr/local/bin/
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /home/nonroot
# A service per subcommand: args ["router"], ["gateway"], ...; yardctl is
# on the PATH (kubectl exec ... -- yardctl ...).
ENTRYPOINT ["/usr/local/bin/switchyard"]
