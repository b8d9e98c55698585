# syntax=docker/dockerfile:1
# Build: docker build -t paynotify .   (the builder is the Go go.mod names)
# Run (docs/production.md; docker-compose.yml runs it all):
#   docker run --rm --read-only --no-healthcheck --env-file paynotify.env -v "$PWD/secrets:/secrets:ro" paynotify migrate
#   docker run -d --read-only -p 8080:8080 --env-file paynotify.env -v "$PWD/secrets:/secrets:ro" paynotify
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go (the SQLite driver too): a static binary with no libc.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/paynotify . && mkdir /out/data

# distroless/static: CA certificates and tzdata, no shell, runs as nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/paynotify /paynotify
# The only directory nonroot may write: a volume mounted at /data starts out
# as this one, so an SQLite database there works (DB_DSN=/data/paynotify.db).
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
# Nothing else is writable (and `docker run --read-only` makes sure), so the
# embedded SQLite default of a bare binary cannot work here: the image
# defaults to MySQL/MariaDB and refuses to start without DB_DSN. For SQLite,
# set DB_DRIVER=sqlite and DB_DSN=/data/paynotify.db with a volume at /data.
ENV DB_DRIVER=mysql
EXPOSE 8080
# No shell or curl in the image: the binary asks its own /readyz (the
# database answers). migrate and consume serve no HTTP: run them with
# --no-healthcheck (docker-compose.yml disables it for them).
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD ["/paynotify", "healthcheck"]
ENTRYPOINT ["/paynotify"]
CMD ["serve"]
