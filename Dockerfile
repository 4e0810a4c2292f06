# dpproxy image: a static binary on a distroless base. Used by
# docker-compose.yml for both the one-shot `demo-setup` and the proxy.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/dpproxy ./cmd/dpproxy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dpproxy /usr/local/bin/dpproxy
EXPOSE 6432
ENTRYPOINT ["/usr/local/bin/dpproxy"]
CMD ["serve", "--config", "/etc/dpproxy/dpproxy.yaml"]
