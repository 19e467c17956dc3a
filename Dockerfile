# The sealbox container image: the static binary .ci/release builds, on
# distroless (CA certificates for ACME and S3, time zones, a nonroot user;
# no shell). Build it with `docker build -t sealbox .` (or podman) in this
# checkout; compose.yaml and compose.postgres.yaml run it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The flags of .ci/release: static, no paths or build id in the binary. The
# commit is stamped when the build context holds the checkout's .git.
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w -buildid=' -o /out/sealbox . \
	&& mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sealbox /usr/local/bin/sealbox
# /data belongs to the image's nonroot user (65532), so a fresh named volume
# mounted there does too; a bind mount must be made writable by 65532.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME /data
# Every flag also reads its SEALBOX_* variable; these make serve (and the
# admin commands, `docker exec … sealbox users add …`) use the volume, and
# listen on the container's own interfaces.
ENV SEALBOX_DATA=/data \
	SEALBOX_LISTEN=0.0.0.0:8080
EXPOSE 8080
# healthcheck asks /readyz at SEALBOX_LISTEN's port on loopback (over HTTPS
# when SEALBOX_TLS_CERT or SEALBOX_TLS_DOMAIN is set): no curl needed.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
	CMD ["/usr/local/bin/sealbox", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/sealbox"]
CMD ["serve"]
