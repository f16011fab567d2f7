# tensord daemon image. Build stage: Debian 12 with the -dev packages;
# runtime stage: Debian 12 slim with only the shared libraries the daemon needs.
#   docker build -t tensord .
#   docker run -p 7070:7070 tensord            # clients: TENSORD_ADDRESS=<host>:7070
FROM debian:12 AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev libdlpack-dev libopenblas-dev pybind11-dev python3-dev \
      libssl-dev nlohmann-json3-dev libelf-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTENSORD_BUILD_TESTS=OFF -DTENSORD_CUDA=OFF \
    && cmake --build /build --target tensord

FROM debian:12-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libopenblas0-pthread \
      libabsl20220623 libssl3 libelf1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home tensord
COPY --from=build /build/bin/tensord /usr/local/bin/tensord
USER tensord
EXPOSE 7070
ENTRYPOINT ["/usr/local/bin/tensord"]
# Each session is limited to half the container's memory (its cgroup's
# memory.max; docker run --memory sets it) unless --session-memory-limit says
# otherwise.
CMD ["serve", "--listen", "0.0.0.0:7070"]
