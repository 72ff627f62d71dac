# syntax=docker/dockerfile:1
# For people with a Docker engine; `make image` builds the same image without
# one. Build stage: exactly what `make build` runs with the image's build tags
# (the Makefile's IMAGE_TAGS: no Helm chart rendering in the webhook's binary),
# then hack/image writes the image's files (the binary, /etc/passwd and
# /etc/group naming uid 65532, CA certificates, /tmp) as a tree, the very files
# `make image` puts in its layer.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN make build VERSION=${VERSION} BIN_DIR=/out TAGS=norender && \
    go run ./hack/image -binary /out/dsguard -path /dsguard -user 65532:65532 -ca-certificates -rootfs /rootfs

# Runtime: that tree on an empty base, as a non-root user; no shell.
FROM scratch
COPY --from=build /rootfs/ /
ENV PATH=/
USER 65532:65532
ENTRYPOINT ["/dsguard"]
CMD ["serve"]
