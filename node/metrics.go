package node

// Prometheus metrics (issue #13 item 1): one registry per node (tests run
// several nodes in one process, so nothing goes to the global default
// registry), served at /metrics by the admin endpoint (admin.go).
//
// Cheap on the hot path: most metrics are read at scrape time from what
// the node publishes anyway (Status, under its lock; the transport's
// atomic counters) and, for the few loop-owned values nobody publishes
// (the protocol's reject counters, gossip's phi per peer), from one round
// trip through the loop per scrape (nodeCollector). The loop itself only
// observes three histograms (WAL fsync, delivery latency, gossip SYN→ACK
// round trip: lock-free atomics) and bumps a few counters under a mutex
// nobody holds for long (metrics.mu).

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// Bounds of the loop's own bookkeeping.
const (
	// maxArrivals bounds the client MULTICASTs whose arrival time the node
	// keeps to measure delivery latency; beyond it new ones are not
	// measured (weft_delivery_latency_untracked_total).
	maxArrivals = 1 << 16
	// arrivalMaxAge: an arrival older than this (a message this node will
	// never deliver: another group's, or one a new leader dropped) is
	// forgotten when the table is full.
	arrivalMaxAge = time.Minute
	// maxSynsPerPeer bounds the SYN send times kept per peer to match ACKs.
	maxSynsPerPeer = 8
)

// metrics is a node's instrumentation: its registry, the histograms the
// loop observes and the loop's counters that Status does not carry.
type metrics struct {
	n   *Node
	reg *prometheus.Registry

	fsync     prometheus.Histogram
	walBytes  prometheus.Counter
	delivery  prometheus.Histogram
	gossipRTT *prometheus.HistogramVec

	// Loop-owned.
	arrivals map[wire.MsgID]int64 // client MULTICAST arrival (Unix ns), until delivered here
	sweptAt  int64
	syns     map[wire.ProcID][]int64 // SYNs sent and not yet answered, oldest first
	ballot   wire.Ballot

	mu sync.Mutex // guards what follows: written by the loop, read by scrapes and /readyz
	// ballotChanges counts the ballots this node has seen its group move
	// to (each one a leader change or a re-election).
	ballotChanges uint64
	// clientRetries counts client MULTICASTs for a message this node
	// already had from a client and had not delivered yet.
	clientRetries uint64
	untracked     uint64 // arrivals not measured (table full)
	gossipRejects map[string]uint64
	peers         map[wire.ProcID]*peerCounts
	health        healthSnap // metrics_health.go
}

// peerCounts are gossip's per-peer transitions, counted by the driver
// from the core's events.
type peerCounts struct {
	flaps       uint64 // up→down and down→up transitions of the verdict
	convictions uint64 // phi convictions (EventDead)
	revivals    uint64 // convicted, then seen alive again
	up          bool
}

func newMetrics(n *Node) *metrics {
	m := &metrics{
		n:   n,
		reg: prometheus.NewRegistry(),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weft_wal_fsync_duration_seconds",
			Help:    "Time to write and fdatasync one Ready's records to the WAL (one group commit).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50µs .. 1.6s
		}),
		walBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weft_wal_written_bytes_total",
			Help: "Encoded bytes of the records appended to the WAL (frame headers and snapshots excluded).",
		}),
		delivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "weft_delivery_latency_seconds",
			Help: "From a client's MULTICAST reaching this node (handed over by the transport) to its delivery here " +
				"(durable, handed to the application); only messages a client sent to this node are measured.",
			Buckets: prometheus.ExponentialBuckets(250e-6, 2, 16), // 0.25ms .. 8s
		}),
		gossipRTT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weft_gossip_rtt_seconds",
			Help:    "Gossip round trip per peer: from sending a SYN to receiving the peer's ACK (queues and both loops included).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}, []string{"peer"}),
		arrivals:      map[wire.MsgID]int64{},
		syns:          map[wire.ProcID][]int64{},
		gossipRejects: map[string]uint64{},
		peers:         map[wire.ProcID]*peerCounts{},
	}
	m.reg.MustRegister(m.fsync, m.walBytes, m.delivery, m.gossipRTT, &nodeCollector{n: n},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the node's metrics registry (what /metrics serves).
func (n *Node) Registry() *prometheus.Registry { return n.met.reg }

// synced observes one group commit: its duration and the records' bytes.
func (m *metrics) synced(d time.Duration, bytes int64) {
	m.fsync.Observe(d.Seconds())
	m.walBytes.Add(float64(bytes))
}

// clientMulticast notes a client's MULTICAST as the loop takes it: when it
// arrived (at, Unix ns), and whether it is a retry of one still pending.
func (m *metrics) clientMulticast(id wire.MsgID, at int64) {
	if _, ok := m.arrivals[id]; ok {
		m.mu.Lock()
		m.clientRetries++
		m.mu.Unlock()
		return
	}
	if len(m.arrivals) >= maxArrivals && at-m.sweptAt > int64(time.Second) {
		m.sweptAt = at
		maps.DeleteFunc(m.arrivals, func(_ wire.MsgID, t int64) bool { return at-t > int64(arrivalMaxAge) })
	}
	if len(m.arrivals) >= maxArrivals {
		m.mu.Lock()
		m.untracked++
		m.mu.Unlock()
		return
	}
	m.arrivals[id] = at
}

// delivered observes a delivery's latency, if its MULTICAST came to this
// node from a client.
func (m *metrics) delivered(id wire.MsgID, now time.Time) {
	if len(m.arrivals) == 0 {
		return
	}
	if at, ok := m.arrivals[id]; ok {
		delete(m.arrivals, id)
		m.delivery.Observe(time.Duration(now.UnixNano() - at).Seconds())
	}
}

// synSent notes a gossip SYN sent to peer at now (Unix ns).
func (m *metrics) synSent(peer wire.ProcID, now int64) {
	q := m.syns[peer]
	if len(q) >= maxSynsPerPeer {
		q = q[1:]
	}
	m.syns[peer] = append(q, now)
}

// ackReceived observes the round trip of the oldest SYN to peer that is
// still within the exchange timeout (the one the core's pending exchange
// matches, membership.Node.onAck).
func (m *metrics) ackReceived(peer wire.ProcID, now int64, timeout time.Duration) {
	q := m.syns[peer]
	for len(q) > 0 && now-q[0] > int64(timeout) {
		q = q[1:]
	}
	if len(q) == 0 {
		delete(m.syns, peer)
		return
	}
	m.gossipRTT.WithLabelValues(peerLabel(peer)).Observe(time.Duration(now - q[0]).Seconds())
	m.syns[peer] = q[1:]
}

// gossipEvent counts gossip's verdict transitions per peer.
func (m *metrics) gossipEvent(e membership.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pc := m.peers[e.Node]
	if pc == nil {
		pc = &peerCounts{}
		m.peers[e.Node] = pc
	}
	switch e.Kind {
	case membership.EventAlive:
		if !pc.up {
			pc.flaps++
			if pc.convictions > 0 {
				pc.revivals++
			}
		}
		pc.up = true
	case membership.EventDead:
		pc.convictions++
		fallthrough
	case membership.EventLeft, membership.EventRemoved:
		if pc.up {
			pc.flaps++
		}
		pc.up = false
	}
}

// gossipRejected counts a gossip frame or message refused by the driver
// or the core.
func (m *metrics) gossipRejected(reason string) {
	m.mu.Lock()
	m.gossipRejects[reason]++
	m.mu.Unlock()
}

// published is called by the loop with every status it publishes.
func (m *metrics) published(st *Status) {
	if st.Ballot != m.ballot {
		m.ballot = st.Ballot
		m.mu.Lock()
		m.ballotChanges++
		m.mu.Unlock()
	}
	m.publishHealth(st)
}

func peerLabel(p wire.ProcID) string { return strconv.FormatUint(uint64(p), 10) }

// loopView is what a scrape reads on the node's loop.
type loopView struct {
	rejected map[string]uint64
	members  []Member
	advice   *adviceReport // gossip_advice.go
}

// rejectCounts returns the protocol core's refused inputs by reason.
func rejectCounts(c core) map[string]uint64 {
	switch c := c.(type) {
	case amcast.RejectCounter:
		return c.Rejected()
	case *rskeenCore:
		if rc, ok := c.rskeenProcess.(amcast.RejectCounter); ok {
			return rc.Rejected()
		}
	}
	return nil
}

// nodeCollector reads the node's published state at scrape time.
type nodeCollector struct{ n *Node }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descInfo     = desc("weft_node_info", "The node: id, group, protocol and incarnation (value 1).", "id", "group", "protocol", "incarnation")
	descLeader   = desc("weft_leader", "1 if this node leads its group.")
	descBallot   = desc("weft_ballot", "The number of the ballot this node joined.")
	descBallotCh = desc("weft_ballot_changes_total", "Ballots this node saw its group move to (leader changes and re-elections).")
	descRecStart = desc("weft_recoveries_started_total", "Ballots this node started (leader recovery attempts).")
	descRecDone  = desc("weft_recoveries_completed_total", "Recoveries this node completed (it became the leader of a new ballot).")
	descRetried  = desc("weft_leader_retried_total", "Messages a new leader re-sent after its recovery (H10.4).")
	descRemc     = desc("weft_remulticasts_total", "Liveness re-multicasts of stuck messages (H12).")
	descCatchUp  = desc("weft_catchups_total", "DELIVER batches re-sent to lagging followers.")
	descSnapSent = desc("weft_snapshots_sent_total", "State transfers this node started as leader: SNAPSHOTs of its whole delivered prefix and session table, to members the floor passed.")
	descInstalls = desc("weft_snapshot_installs_total", "State transfers (SNAPSHOTs) this node installed.")
	descColl     = desc("weft_collected_total", "Messages garbage-collected.")
	descHandOver = desc("weft_handovers_total", "Ballots this node started because its group's leader handed its leadership over (a planned departure).")
	descRetries  = desc("weft_client_retries_total", "Client MULTICASTs for a message this node already had from a client and had not delivered yet.")
	descRecv     = desc("weft_multicasts_received_total", "Client MULTICASTs the node stepped.")
	descShed     = desc("weft_client_shed_total", "Client MULTICASTs shed unread and answered OVERLOADED, by reason.", "reason")
	descDeliv    = desc("weft_deliveries_total", "Deliveries at this node (durable, handed to the application).")
	descUntrack  = desc("weft_delivery_latency_untracked_total", "Client MULTICASTs whose delivery latency was not measured (table full).")
	descRetained = desc("weft_retained_entries", "State entries the protocol holds in memory (Retained: messages, sessions, remembered ids).")
	descSyncs    = desc("weft_wal_syncs_total", "WAL group commits (one fdatasync each).")
	descRawPause = desc("weft_wal_raw_sync_pauses_total", "Times a raw WAL fdatasync took so long that the log synced the ordinary way until the disk was fast again (wal.Options.RawSync).")
	descRecords  = desc("weft_wal_records_total", "Records appended to the WAL.")
	descBatches  = desc("weft_batches_sent_total", "BATCH messages sent to other replicas (a Ready's messages to one peer in one frame; docs/batching.md).")
	descBatched  = desc("weft_batched_messages_total", "Protocol messages sent inside BATCH messages.")
	descCompact  = desc("weft_compactions_total", "Log compactions, by result.", "result")
	descInboxN   = desc("weft_inbox_messages", "Messages queued for the node's loop, by inbox.", "inbox")
	descInboxB   = desc("weft_inbox_bytes", "Encoded bytes queued for the node's loop, by inbox.", "inbox")
	descInboxPk  = desc("weft_inbox_peak_bytes", "The most encoded bytes an inbox ever held.", "inbox")
	descSideDrop = desc("weft_side_drops_total", "Gossip frames dropped because the side queue was full.")
	descViewDrop = desc("weft_view_drops_total", "Clients' view requests dropped because their queue was full.")
	descInboxW   = desc("weft_inbox_waits_total", "Peer messages whose reader waited for room in the peer inbox (back-pressure).")
	descStalls   = desc("weft_loop_stalls_total", "Ticks the node's loop handled more than 5 ticks after the one before: the loop did not run meanwhile (a slow pass or no CPU).")
	descStepErr  = desc("weft_step_errors_total", "Inputs the protocol refused (any reason; see weft_rejected_inputs_total).")
	descRejected = desc("weft_rejected_inputs_total", "Remote inputs the protocol core refused, by reason (amcast.Rejects).", "reason")
	descPeerQN   = desc("weft_transport_peer_queue_messages", "Messages waiting in the send queue to a peer.", "peer")
	descPeerQB   = desc("weft_transport_peer_queue_bytes", "Encoded bytes waiting in the send queue to a peer.", "peer")
	descPeerUp   = desc("weft_transport_peer_connected", "1 if the stream to the peer is connected.", "peer")
	descCliQB    = desc("weft_transport_client_queue_bytes", "Bytes waiting in the connected clients' reply queues.")
	descClients  = desc("weft_transport_clients", "Connected clients.")
	descConns    = desc("weft_transport_inbound_connections", "Inbound connections counted against max_conns.")
	descBytes    = desc("weft_transport_bytes_total", "Frame bytes sent and received (after the handshake).", "direction")
	descDrops    = desc("weft_transport_drops_total", "Messages the transport dropped instead of sending, by reason.", "reason")
	descHsRej    = desc("weft_transport_handshake_rejects_total", "Inbound handshakes refused or failed, by reason.", "reason")
	descDialF    = desc("weft_transport_dial_failures_total", "Failed outbound connection attempts, by reason.", "reason")
	descConnE    = desc("weft_transport_conn_errors_total", "Established connections dropped on bad input or a network error, by reason.", "reason")
	descPhi      = desc("weft_gossip_phi", "The phi-accrual suspicion of a peer (gossip's view).", "peer")
	descMemUp    = desc("weft_gossip_member_up", "1 if gossip judges the peer up.", "peer")
	descFlaps    = desc("weft_gossip_flaps_total", "Up/down transitions of gossip's verdict on a peer.", "peer")
	descConv     = desc("weft_gossip_convictions_total", "Phi convictions of a peer.", "peer")
	descReviv    = desc("weft_gossip_revivals_total", "A convicted peer seen alive again.", "peer")
	descRounds   = desc("weft_gossip_rounds_total", "Gossip rounds run.")
	descLive     = desc("weft_gossip_live_members", "Peers gossip judges up (this node excluded).")
	descProbes   = desc("weft_gossip_probes_total", "Direct probes between group members (lan profile): pings sent, pongs received, pings received, pings from unknown endpoints (not answered).", "kind")
	descProbeCv  = desc("weft_gossip_probe_convictions_total", "Convictions by the direct probes (a probe peer silent past the probe timeout) and by published verdicts applied before phi's.", "by")
	descVerdictD = desc("weft_gossip_verdicts_skipped_total", "Published verdicts skipped: malformed or surplus entries, and verdicts beyond the table's bound.", "reason")
	descGossRej  = desc("weft_gossip_rejected_total", "Gossip frames or messages refused, by reason.", "reason")
	descReady    = desc("weft_ready", "1 if /readyz answers 200 (member of a group with a known leader, caught up).")
	descLag      = desc("weft_replication_lag_seconds", "How long this follower has been behind the oldest leader heartbeat whose deliveries it has not reached (0: caught up or leader).")
)

var allDescs = []*prometheus.Desc{descInfo, descLeader, descBallot, descBallotCh, descRecStart, descRecDone, descRetried, descRemc,
	descCatchUp, descColl, descHandOver, descRetries, descRecv, descShed, descDeliv, descUntrack, descRetained, descSyncs, descRawPause, descRecords, descCompact,
	descBatches, descBatched, descInboxN, descInboxB, descInboxPk, descSideDrop, descViewDrop, descInboxW, descStalls, descStepErr, descRejected, descPeerQN, descPeerQB, descPeerUp, descCliQB,
	descClients, descConns, descBytes, descDrops, descHsRej, descDialF, descConnE, descPhi, descMemUp, descFlaps, descConv,
	descReviv, descRounds, descLive, descProbes, descProbeCv, descVerdictD, descGossRej, descReady, descLag}

// Describe implements prometheus.Collector.
func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
	for _, d := range adviceDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	st := n.Status()
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}
	gauge(descInfo, 1, peerLabel(st.ID), strconv.FormatUint(uint64(st.Group), 10), st.Protocol, strconv.FormatUint(st.Incarnation, 10))
	gauge(descLeader, b2f(st.Leader))
	gauge(descBallot, float64(st.Ballot.N))
	cov, s := st.Coverage, st.Stats
	counter(descRecStart, float64(cov.BallotsStarted))
	counter(descRecDone, float64(cov.LeaderChanges))
	counter(descRetried, float64(cov.Retried))
	counter(descRemc, float64(cov.Remulticasts))
	counter(descCatchUp, float64(cov.CatchUps))
	counter(descSnapSent, float64(cov.Snapshots))
	counter(descInstalls, float64(cov.Installs))
	counter(descColl, float64(cov.Collected))
	counter(descHandOver, float64(cov.HandOvers))
	counter(descRecv, float64(s.ClientSteps))
	counter(descShed, float64(s.ClientShed), "inbox_full")
	counter(descShed, float64(s.ClientShedShare), "client_share")
	counter(descDeliv, float64(s.Delivered))
	gauge(descRetained, float64(st.Retained))
	counter(descSyncs, float64(s.Syncs))
	counter(descRawPause, float64(s.RawSyncPauses))
	counter(descRecords, float64(s.Records))
	counter(descBatches, float64(s.Batches))
	counter(descBatched, float64(s.Batched))
	counter(descCompact, float64(s.Compactions), "done")
	counter(descCompact, float64(s.CompactionErrors), "failed")
	gauge(descInboxN, float64(s.InboxQueued), "peer")
	gauge(descInboxB, float64(s.InboxBytes), "peer")
	gauge(descInboxPk, float64(s.InboxPeakBytes), "peer")
	gauge(descInboxN, float64(s.ClientQueued), "client")
	gauge(descInboxB, float64(s.ClientInboxBytes), "client")
	gauge(descInboxPk, float64(s.ClientInboxPeakBytes), "client")
	counter(descSideDrop, float64(s.SideDrops))
	counter(descViewDrop, float64(s.ViewDrops))
	counter(descInboxW, float64(s.InboxWaits))
	counter(descStalls, float64(s.LoopStalls))
	counter(descStepErr, float64(s.StepErrors))
	if g := st.Gossip; g != nil {
		counter(descRounds, float64(g.Rounds))
		gauge(descLive, float64(g.Live))
		counter(descProbes, float64(g.PingSent), "ping_sent")
		counter(descProbes, float64(g.PongRecv), "pong_received")
		counter(descProbes, float64(g.PingRecv), "ping_received")
		counter(descProbes, float64(g.UnknownPings), "ping_unknown")
		counter(descProbeCv, float64(g.ProbeConvictions), "probe")
		counter(descProbeCv, float64(g.VerdictConvictions), "verdict")
		counter(descVerdictD, float64(g.BadVerdicts), "bad")
		counter(descVerdictD, float64(g.DroppedVerdicts), "over_bound")
	}

	c.collectTransport(ch, n.TransportStats(), gauge, counter)

	m := n.met
	m.mu.Lock()
	counter(descBallotCh, float64(m.ballotChanges))
	counter(descRetries, float64(m.clientRetries))
	counter(descUntrack, float64(m.untracked))
	for r, v := range m.gossipRejects {
		counter(descGossRej, float64(v), r)
	}
	for p, pc := range m.peers {
		counter(descFlaps, float64(pc.flaps), peerLabel(p))
		counter(descConv, float64(pc.convictions), peerLabel(p))
		counter(descReviv, float64(pc.revivals), peerLabel(p))
	}
	m.mu.Unlock()

	rd := n.Readiness()
	gauge(descReady, b2f(rd.Ready))
	gauge(descLag, rd.LagSeconds)

	// The loop-owned values: one round trip through the loop (none if the
	// node has stopped).
	var lv loopView
	if n.control(func() error {
		lv.rejected = rejectCounts(n.m)
		if n.gossip != nil {
			lv.members = n.gossip.members()
			rep := n.gossip.report()
			lv.advice = &rep
		}
		return nil
	}) != nil {
		return
	}
	for _, r := range slices.Sorted(maps.Keys(lv.rejected)) {
		counter(descRejected, float64(lv.rejected[r]), r)
	}
	for _, mb := range lv.members {
		if mb.Self || mb.Status == MemberUnknown {
			continue
		}
		gauge(descPhi, mb.Phi, peerLabel(mb.ID))
		gauge(descMemUp, b2f(mb.Status == MemberUp), peerLabel(mb.ID))
	}
	var th float64
	if n.cfg.Gossip != nil {
		th = n.cfg.Gossip.ClockSkewThreshold.Seconds()
	}
	collectAdvice(st.Gossip, th, lv.members, lv.advice, gauge, counter)
}

func (c *nodeCollector) collectTransport(ch chan<- prometheus.Metric, ts transport.Stats, gauge, counter func(*prometheus.Desc, float64, ...string)) {
	for p, ps := range ts.Peers {
		gauge(descPeerQN, float64(ps.Queued), peerLabel(p))
		gauge(descPeerQB, float64(ps.QueuedBytes), peerLabel(p))
		gauge(descPeerUp, b2f(ps.Connected), peerLabel(p))
	}
	gauge(descCliQB, float64(ts.ClientQueueBytes))
	gauge(descClients, float64(ts.Clients))
	gauge(descConns, float64(ts.Conns))
	counter(descBytes, float64(ts.BytesIn), "in")
	counter(descBytes, float64(ts.BytesOut), "out")
	for r, v := range ts.Drops {
		counter(descDrops, float64(v), r.String())
	}
	for r, v := range ts.Rejected {
		counter(descHsRej, float64(v), r.String())
	}
	for r, v := range ts.DialFailures {
		counter(descDialF, float64(v), r.String())
	}
	for r, v := range ts.ConnErrors {
		counter(descConnE, float64(v), r.String())
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
