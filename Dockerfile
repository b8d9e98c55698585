# syntax=docker/dockerfile:1
# Build: docker build -t paynotify .
# Run:   docker run --rm -p 8080:8080 --env-file paynotify.env paynotify        (serve)
#        docker run --rm --env-file paynotify.env paynotify migrate
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go (the SQLite driver too): a static binary with no libc.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/paynotify .

# distroless/static: CA certificates and tzdata, no shell, runs as nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/paynotify /paynotify
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/paynotify"]
CMD ["serve"]
