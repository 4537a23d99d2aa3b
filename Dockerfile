# capsize in a container: built with the Rust toolchain, run on a slim Debian as a non-root
# user. The entrypoint is the binary, so `docker run IMAGE sweep ...` is `capsize sweep ...`;
# with no arguments it prints `capsize --help`. The example scenarios are in
# /opt/capsize/scenarios. Build: docker build -t capsize .
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin capsize

FROM debian:bookworm-slim
RUN useradd --uid 10001 --user-group --create-home capsize
COPY --from=build /src/target/release/capsize /usr/local/bin/capsize
COPY scenarios /opt/capsize/scenarios
USER 10001:10001
WORKDIR /home/capsize
ENTRYPOINT ["/usr/local/bin/capsize"]
CMD ["--help"]
