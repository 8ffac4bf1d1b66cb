#!/bin/bash
# Docker HEALTHCHECK for the sluice images: GET /v2/health/ready on the server's plain-HTTP port, with bash's
# /dev/tcp (the runtime image carries no curl). Exit 0 only on "HTTP/1.1 200"; the server answers 503 until
# every bucket of every model is loaded and warmed, and again once SIGTERM starts the drain.
# SLUICE_HEALTH_PORT: the HTTP port (default 8000). Not for TLS configs (use the gRPC probe of Kubernetes, or
# a client with TLS); Kubernetes ignores HEALTHCHECK and uses the chart's grpc.health.v1 probes instead.
set -u
port="${SLUICE_HEALTH_PORT:-8000}"
exec 3<>"/dev/tcp/127.0.0.1/${port}" || exit 1
printf 'GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
IFS=' ' read -r -t 5 _version status _rest <&3 || exit 1
[ "${status}" = "200" ]
