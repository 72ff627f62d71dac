# syntax=docker/dockerfile:1
# Build stage: exactly what `make build` runs, so the image and a local build
# are the same binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN make build VERSION=${VERSION} BIN_DIR=/out

# Runtime: static binary on distroless, as a non-root user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dsguard /dsguard
USER 65532:65532
ENTRYPOINT ["/dsguard"]
CMD ["serve"]
