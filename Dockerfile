# linkraft's container image: the static binary alone on an empty base.
#
#   make image                      # builds linkraft:<version> and linkraft:latest with podman
#   make image CONTAINER=docker     # the same with docker
#
# Why the binary is built outside this file: a Go build stage needs a golang
# base image and the modules, both from the network, and the machines this
# project is built and tested on can reach neither (images cannot be pulled;
# the module cache lives on the host). `make image` therefore builds the
# binary as `make build` does (CGO_ENABLED=0 -trimpath, so it is static and
# needs no libc) into a fresh build context and runs this file on it. The
# image needs no registry at all: FROM scratch.
#
# The build context (what `make image` and e2e/image_test.go prepare):
#   linkraft   the static binary
#   data/      an empty directory, which becomes /data owned by the user
#              below, so a new volume mounted there is writable by it
#
# Run and cluster settings: docs/DEPLOY.md, "Container" and "Compose".
FROM scratch

COPY linkraft /linkraft
COPY --chown=65532:65532 data /data

# Every serve flag reads LINKRAFT_<NAME>. The node keeps its data in the
# volume and answers HTTP on every interface of the container. Raft and
# gossip stay on loopback (the binary's defaults) so that one container
# runs with nothing set: it makes its cluster key at its first start and
# keeps it in the volume (/data/cluster.key). A cluster sets
# LINKRAFT_RAFT_ADDR=0.0.0.0:8081, LINKRAFT_GOSSIP_ADDR=0.0.0.0:8082,
# LINKRAFT_ADVERTISE and one cluster key for every node
# (LINKRAFT_CLUSTER_KEY, or LINKRAFT_CLUSTER_KEY_FILE naming a mounted file).
# The ID is fixed because the default, the host name, is a container's
# random ID, which changes when the container is recreated over the same
# volume: the Raft configuration in the data names the node by its ID.
# Give every node of a cluster its own.
ENV LINKRAFT_DATA_DIR=/data \
    LINKRAFT_HTTP_ADDR=:8080 \
    LINKRAFT_ID=node1

# No root: a numeric user (the distroless "nonroot" IDs), since the image
# has no /etc/passwd to name one.
USER 65532:65532
VOLUME /data

# HTTP; Raft (TCP); gossip (TCP and UDP).
EXPOSE 8080/tcp 8081/tcp 8082/tcp 8082/udp

# No shell or curl in the image: the binary checks itself. `linkraft health`
# asks this container's LINKRAFT_HTTP_ADDR port for /health: readiness, so
# "healthy" means the node serves its cluster's links (a node waiting for
# its peers is "starting", then "unhealthy"); `--live` would ask liveness.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["/linkraft", "health"]

ENTRYPOINT ["/linkraft"]
CMD ["serve"]
