package membership

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Key identifies one application state of an endpoint. The number is the
// wire id: it never changes meaning. The registry below is append-only, like
// Cassandra's ApplicationState enum whose ordinal is its wire id
// (CASSANDRA-16484): never renumber, reuse or remove an entry, only append.
// testdata/keys.golden pins it.
//
// Nodes relay keys they do not know unchanged, so a new key can be rolled
// out one node at a time.
type Key uint16

// Built-in keys. Values are short strings; large values do not belong in
// gossip (Config.MaxValueBytes).
const (
	// KeyInvalid is never sent.
	KeyInvalid Key = 0
	// KeyStatus is the node's status: free-form ("NORMAL", "LEAVING", ...)
	// except the departed forms "LEFT,<expiry ms>" and "REMOVED,<expiry
	// ms>", which only Leave and Assassinate write.
	KeyStatus Key = 1
	// KeyLoad is a load figure.
	KeyLoad Key = 2
	// KeyReleaseVersion is the software release.
	KeyReleaseVersion Key = 3
	// KeyGossipAddr is the address peers gossip with (host:port).
	KeyGossipAddr Key = 4
	// KeyClientAddr is the address clients connect to.
	KeyClientAddr Key = 5
	// KeyGroup is the replica group the node serves.
	KeyGroup Key = 6
	// KeyRole is the node's current role in its group (leader, follower).
	KeyRole Key = 7
	// KeyBallot is the node's current ballot, so clients find the leader.
	KeyBallot Key = 8
	// KeyHostID is a stable host identity across address changes.
	KeyHostID Key = 9
	// KeySeedDigest is the digest of the node's configured seed list
	// (SeedDigest), so nodes whose lists differ are found (seeds.go).
	KeySeedDigest Key = 10
	// KeyConvicted lists the probe peers this node convicted from direct
	// probing (probe.go): "node:generation:heartbeat" entries separated by
	// commas, each saying that node showed no sign of life here for
	// Config.ProbeTimeout after that heartbeat. Every node applies these
	// verdicts (see Node.condemned), so a crash is known cluster-wide at
	// gossip speed instead of after each node's own phi silence.
	KeyConvicted Key = 11

	// KeyFirstApp is the first key free for application use; applications
	// number their own keys from here and keep them append-only too.
	KeyFirstApp Key = 0x8000
)

// keyNames is the registry, indexed by wire id. Append only.
var keyNames = [...]string{
	KeyInvalid:        "INVALID",
	KeyStatus:         "STATUS",
	KeyLoad:           "LOAD",
	KeyReleaseVersion: "RELEASE_VERSION",
	KeyGossipAddr:     "GOSSIP_ADDR",
	KeyClientAddr:     "CLIENT_ADDR",
	KeyGroup:          "GROUP",
	KeyRole:           "ROLE",
	KeyBallot:         "BALLOT",
	KeyHostID:         "HOST_ID",
	KeySeedDigest:     "SEED_DIGEST",
	KeyConvicted:      "CONVICTED",
}

// RegisteredKeys returns the built-in keys in wire-id order, KeyInvalid
// excluded.
func RegisteredKeys() []Key {
	ks := make([]Key, 0, len(keyNames)-1)
	for i := 1; i < len(keyNames); i++ {
		ks = append(ks, Key(i))
	}
	return ks
}

// String returns the registered name, "APP+n" for application keys and
// "KEY(n)" for ids this build does not know.
func (k Key) String() string {
	switch {
	case int(k) < len(keyNames):
		return keyNames[k]
	case k >= KeyFirstApp:
		return "APP+" + strconv.Itoa(int(k-KeyFirstApp))
	}
	return fmt.Sprintf("KEY(%d)", uint16(k))
}

// Status values. Departed statuses carry their expiry as Unix milliseconds
// after a comma: "LEFT,1767225600000".
const (
	StatusNormal  = "NORMAL"
	StatusLeaving = "LEAVING"
	// StatusLeft is a graceful departure (Leave).
	StatusLeft = "LEFT"
	// StatusRemoved is a forced removal (Assassinate).
	StatusRemoved = "REMOVED"
)

// departedStatus parses a KeyStatus value. It reports whether the value is
// a departed status and its expiry in Unix nanoseconds (0 if the expiry is
// missing or unreadable).
func departedStatus(v string) (departed bool, expire int64) {
	head, _, _ := strings.Cut(v, ",")
	if head != StatusLeft && head != StatusRemoved {
		return false, 0
	}
	tail := v[strings.LastIndexByte(v, ',')+1:] // the expiry is the last field
	msec, err := strconv.ParseInt(tail, 10, 64)
	if err != nil || msec <= 0 || msec > math.MaxInt64/1_000_000 {
		return true, 0
	}
	return true, msec * 1e6
}

// departedValue formats a departed status with its expiry (Unix ns).
func departedValue(status string, expire int64) string {
	return status + "," + strconv.FormatInt(expire/1e6, 10)
}
