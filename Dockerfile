# capsize in a container: built with the Rust toolchain, run on a slim Debian as a non-root
# user. The entrypoint is the binary, so `docker run IMAGE sweep ...` is `capsize sweep ...`;
# with no arguments it prints `capsize --help`. The example scenarios are in
# /opt/capsize/scenarios (and `capsize examples` writes them anywhere). Build:
#   docker build --build-arg CAPSIZE_COMMIT=$(git rev-parse --short=12 HEAD) -t capsize .
# (.git stays out of the image's context: the commit `capsize --version` names comes in here.)
FROM rust:1.95-slim-bookworm AS build
ARG CAPSIZE_COMMIT=unknown
WORKDIR /src
COPY . .
# (An ARG is in the environment of each RUN after it: build.rs reads CAPSIZE_COMMIT.)
RUN cargo build --release --locked --bin capsize

FROM debian:bookworm-slim
RUN useradd --uid 10001 --user-group --create-home capsize
COPY --from=build /src/target/release/capsize /usr/local/bin/capsize
COPY scenarios /opt/capsize/scenarios
USER 10001:10001
WORKDIR /home/capsize
ENTRYPOINT ["/usr/local/bin/capsize"]
CMD ["--help"]
