# longhorn-guard image: one binary for the webhook server (`serve`) and the init gate (`gate`).
#   make image                    # = docker build -t ghcr.io/longhorn-guard/longhorn-guard:0.1.0 .
#   make image-oci                # the same image without an engine (image/oci-image.py)
# Both base images are build args, e.g. a mirror:
#   docker build --build-arg BUILD_IMAGE=mirror.local/rust:1-bookworm \
#     --build-arg BASE_IMAGE=mirror.local/distroless/static-debian12:nonroot -t IMAGE .
ARG BUILD_IMAGE=docker.io/library/rust:1-bookworm
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

# Build: a static glibc binary (+crt-static; no musl target needed), so the run stage needs no
# libc at all: distroless/static or scratch (docs/install.md, "Image").
FROM ${BUILD_IMAGE} AS build
WORKDIR /src
# .dockerignore keeps build output, generated certificates and .git out of the context.
COPY . .
RUN target=$(rustc -vV | sed -n 's/^host: //p') \
 && RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$target" --bin longhorn-guard \
 && install -D -m 0755 "target/$target/release/longhorn-guard" /out/longhorn-guard

# Run: no shell, no package manager, no libc; user 65532 (nonroot).
FROM ${BASE_IMAGE}
# The init gate runs /usr/local/bin/longhorn-guard (src/mutate/init_gate.rs GATE_BINARY).
COPY --from=build /out/longhorn-guard /usr/local/bin/longhorn-guard
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/longhorn-guard"]
CMD ["serve", "--tls-dir", "/etc/longhorn-guard/tls", "--listen", "0.0.0.0:8443"]
