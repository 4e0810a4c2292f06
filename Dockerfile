# dpproxy image: a static binary on a distroless base. Used by
# docker-compose.yml for both the one-shot `demo-setup` and the proxy.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/dpproxy ./cmd/dpproxy && mkdir -p /out/tls

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dpproxy /usr/local/bin/dpproxy
# The directory the compose file's tls volume is mounted on, owned by the
# nonroot user so that a new volume is writable by demo-setup.
COPY --from=build --chown=65532:65532 /out/tls /etc/dpproxy/tls
EXPOSE 6432
ENTRYPOINT ["/usr/local/bin/dpproxy"]
CMD ["serve", "--config", "/etc/dpproxy/dpproxy.yaml"]
