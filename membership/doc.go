// Package membership is weft's gossip membership: Cassandra-style
// epidemic dissemination of versioned per-node soft state, with a
// phi-accrual failure detector (package phi) judging liveness from
// heartbeat progress. Gossip carries liveness and soft state only; its
// verdicts are hints, never proof of death, and it never decides group
// composition or ownership.
//
// # Driving a Node
//
// A Node is a pure, deterministic state machine in the style of
// amcast.Machine. A driver loops:
//
//	n.Tick(now)                 // once per Config.Interval: one gossip round
//	n.Step(now, from, msg)      // each received message
//	rd := n.Ready()
//	persist rd.Generation       // if non-zero, durably, before sending
//	send rd.Messages
//	handle rd.Events
//	n.Advance()
//
// now is int64 nanoseconds of the driver's clock in Unix time (the wall
// clock, or the simulator's virtual clock started at a realistic epoch):
// generations are wall-clock seconds and departed records expire at
// absolute times. The node never reads a clock, starts goroutines, touches
// the network or uses global randomness (Config.Rand). The same inputs give
// the same outputs.
//
// # State and exchange
//
// Each node owns one record: a generation (process start, persisted as
// max(stored+1, now)), a heartbeat and application states, all stamped from
// one version counter. Only the owner writes its record; others relay it.
// Two copies are ordered by generation, then version.
//
// Each round the node bumps its heartbeat and sends a SYN with one digest
// (node, generation, max version) per endpoint it knows, sorted by node,
// to one random live peer; to one unreachable peer with probability
// unreachable/(live+1); and to a seed when nothing is live, else with
// probability seeds/(live+unreachable) if the live pick was not a seed or
// fewer peers are live than there are seeds. LEFT and REMOVED endpoints
// are never targets. The receiver answers with an ACK: the deltas the
// initiator lacks (a whole record for an older generation, the items
// above the initiator's version otherwise) and requests for what it
// lacks; the initiator applies the deltas and answers the requests with
// an ACK2. A SYN naming another cluster is dropped, counted and reported
// once per sender.
//
// # Clocks, seed lists, restarts
//
// Each SYN carries its sender's wall time (the now of Tick), and each ACK
// and ACK2 echoes the time of the message it answers with its own receive
// and send times, so the receiver of a reply estimates its offset to the
// sender NTP-style (clock.go: one smoothed estimate per known peer,
// EventClockSkew beyond Config.ClockSkewThreshold, EventGenerationAhead
// for a generation ahead of the local clock). Drivers publish the digest
// of their seed list (KeySeedDigest) and judge the live members' with
// SeedMajority (seeds.go). A restarting node contacts the peers it knew
// (Config.Bootstrap) before its seeds.
//
// # Liveness
//
// Every heartbeat advance of an endpoint, whichever peer relayed it, is an
// arrival in that endpoint's phi window. An endpoint whose phi exceeds the
// threshold is convicted (EventDead) unless a guard suppresses convictions
// (a local pause, or a stale inbound backlog: Node.SetBacklog). Only fresh
// progress marks it up again (EventAlive). A newly learned endpoint starts
// neither up nor convicted and is marked up at its first heartbeat
// progress after that: a stale copy of a dead node relayed by a laggard
// never looks alive (Cassandra uses an echo round trip for the same
// purpose). A newer generation replaces a record wholesale
// (EventRestarted) and counts as progress.
//
// # Direct probes and verdicts
//
// With Config.ProbeTimeout and ProbePeers (the lan profile; the driver
// passes the node's replica group), a node also sends each probe peer a
// Ping every round, answered by a Pong; both carry the sender's generation
// and heartbeat (wire version 3). A probe peer without any life sign for
// ProbeTimeout (Ping, Pong, or relayed heartbeat progress, dated from when
// it was likely made) is convicted, and the verdict is published in the
// node's own record (KeyConvicted). Every node applies the verdicts it
// holds: an endpoint whose heartbeat has not moved past a verdict's (plus
// two) is convicted at the next round, so a crash is known everywhere one
// gossip spread after ProbeTimeout instead of after each node's own phi
// silence (probe.go explains the choices; config.go's LAN the figures).
//
// # Departures
//
// Leave publishes STATUS=LEFT,<expiry> and keeps gossiping for
// LeaveAnnounce. Peers mark the endpoint down (EventLeft), keep and relay
// its record until the expiry, then evict it (EventRemoved) into
// quarantine: for QuarantineDelay, gossip about it is ignored, and a peer
// still holding an older copy is sent the final record so it evicts too.
// Assassinate is the operator's last resort: a multi-round operation that
// watches the target for AssassinateCheck, refuses if its heartbeat moves,
// and otherwise publishes REMOVED under generation+1.
//
// # Bounds
//
// Every message is at most MaxMessageBytes: digests are paged over rounds
// (contiguous ranges), deltas are cut at a version prefix (Base, w] that
// the receiver completes in later exchanges. ACKs awaiting their ACK2 are
// capped (MaxPendingAcks), replies are accepted only for exchanges this
// node opened, the local view is capped at MaxStateBytes with a warning
// at StateWarnBytes, and departed records are reaped at expiry.
//
// # Cost
//
// Endpoints are kept in one slice sorted by node, and every message lists
// entries sorted by node, so handling a SYN, ACK or ACK2 is a linear merge
// with no maps (dense ids are found by position). A record is 32 bytes
// without pointers: the highest version is derived (heartbeat or highest
// item), app-state lists live once in an AppTable, reference counted and
// shared by content, and each endpoint's phi window is a slot of a
// phi.Arena (16 bytes plus 2 per sample). Per node and round the work is
// O(endpoints), dominated by the digest list (about 9 bytes per endpoint
// on the wire).
//
// # Simulators
//
// A simulator holding N nodes holds N² records. Nodes driven from one
// goroutine can share one AppTable (Config.Apps: a list thousands of
// nodes hold is stored once) and one Pool (Config.Pool: message lists are
// recycled at Advance, so the driver encodes each message before it), a
// Decoder reuses its memory across received messages, and Preload starts
// a node from a converged view instead of thousands of bootstrap rounds.
// With an 8-sample window a record and its window take about 64 bytes.
//
// # Beyond Cassandra
//
// weft keeps Cassandra's wire semantics and adds: the generation guard for
// unknown endpoints too; fresh-progress marking instead of an echo; the
// quarantine answering older copies with the final record; departed
// records already expired are not re-learned; a node always introduces
// itself in an ACK if the SYN did not list it; explicit delta bases so a
// record never has gaps; paging, caps and pending-exchange checks; a
// REMOVED record for this node's own id is reported (EventRemoved).
package membership
