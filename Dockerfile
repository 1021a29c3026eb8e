# longhorn-guard image: one binary for the webhook server (`serve`) and the init gate (`gate`).
#   docker build -t ghcr.io/longhorn-guard/longhorn-guard:0.1.0 .
# Build: the Rust toolchain image; release build with the locked dependency versions.
FROM rust:1-bookworm AS build
WORKDIR /src
# .dockerignore keeps build output, generated certificates and .git out of the context.
COPY . .
RUN cargo build --release --locked --bin longhorn-guard \
 && install -D -m 0755 target/release/longhorn-guard /out/longhorn-guard

# Run: distroless with glibc and CA certificates, no shell, no package manager, user 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
# The init gate runs /usr/local/bin/longhorn-guard (src/mutate/init_gate.rs GATE_BINARY).
COPY --from=build /out/longhorn-guard /usr/local/bin/longhorn-guard
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/longhorn-guard"]
CMD ["serve", "--tls-dir", "/etc/longhorn-guard/tls", "--listen", "0.0.0.0:8443"]
