// Package deploy holds weft's deployment files (Dockerfile, Compose,
// Kubernetes, systemd) and the tests that check them without Docker,
// Kubernetes or systemd: each test reads the files as the tool would,
// follows its mounts to the weft configuration each agent would read,
// makes the certificates the documented `weft certs` command makes, and
// runs `weft config check` (the built binary) on every configuration as
// the agent would see it; then it checks the structure that makes the
// deployment right (one service or pod per node, each with its own
// volume and certificate, the peers' names resolving to those services,
// a PodDisruptionBudget per group).
package deploy
