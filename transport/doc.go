// Package transport carries wire messages between weft processes over TCP.
//
// The protocol cores emit wire.Envelope values and assume reliable FIFO
// point-to-point channels; they tolerate loss (they retransmit and catch
// up). This package provides channels that are FIFO and lossy: a message
// may be dropped (queue full, connection lost), but messages from one
// process to another are never reordered, duplicated or corrupted.
//
// # Streams
//
// A node dials one TCP connection to every peer and sends only on the
// connections it dialed; the connections it accepts from other nodes are
// read-only. So each ordered pair (from, to) has exactly one stream at a
// time. When a peer redials (after an error, or because it restarted), the
// acceptor closes the older connection and waits until its reader has
// delivered its last message before it reads the newer one, so the
// Handler sees each sender's messages in order across reconnections.
//
// Clients (Config.Role = RoleClient) dial the nodes they talk to, send
// MULTICASTs and receive the replies on the same connection: a client's
// accepted connection is the one exception to "accepted connections are
// read-only". A node replies with Send(clientID, m) while the client is
// connected.
//
// Each destination has a send queue bounded in messages (Config.QueueSize)
// and in bytes (Config.QueueBytes for peers, Config.ClientQueueBytes for a
// client's replies): one buffer the senders append encoded frames to,
// drained by one writer goroutine that takes the whole buffer at once and
// writes it with one call, so batching grows with load and an idle
// connection writes one message at a time (TCP_NODELAY is on). A Batch
// (batch.go) queues a loop pass's messages and wakes each writer once, at
// its Flush, and encodes a message sent to several destinations once.
// Send never blocks; when the queue is full it drops
// the message, counts it (queue_full or queue_bytes) and returns
// ErrQueueFull. A lost connection is redialed with jittered exponential
// backoff; its queue keeps filling meanwhile (and drops once full).
// Messages written into a connection that then breaks are lost.
//
// # Limits on inbound connections
//
// An accepted connection takes a slot before anything is read from it:
// Config.MaxConns in all and Config.MaxConnsPerHost per remote IP address
// bound the connections that are handshaking or belong to clients (a
// configured peer's connection gives its slot back after its handshake;
// there is at most one per peer). Over a cap, the connection is answered
// with a REJECT (too_many_connections) and closed (caps.go). The handshake
// must finish within Config.HandshakeTimeout, and an accepted connection
// that then carries nothing for Config.IdleTimeout is closed
// (idle_timeout); every writer sends a PING frame after Config.PingEvery
// without traffic, so live peers and clients are never idle.
//
// # Wire format
//
// Both directions of a connection start with a 5-byte preamble, "WEFT" and
// TransportVersion, followed by frames:
//
//	u32 length | u8 type | payload (length bytes) | u32 CRC32C(type, payload)
//
// (big-endian). A reader checks the type, then the length against its
// limit (Config.MaxFrame, default 4 MiB; 2 KiB during the handshake),
// before it reads or allocates the payload. A FrameMessage carries one
// message encoded by wire.Append; the sender and recipient are implied by
// the connection. A FramePing (empty) keeps an idle connection alive.
//
// The dialer sends its preamble and a HELLO frame (wire version, role,
// sender id, the id it means to reach, cluster name). The acceptor answers
// with its preamble and a WELCOME frame (the same fields, for itself), or a
// REJECT frame with a Reason and a text, and closes. It rejects a wrong
// magic or transport version, a wrong wire version, another cluster name,
// a HELLO meant for another process, and an id that Config.Allow (default:
// the configured peers as nodes, any other id as a client) refuses. The
// dialer checks the WELCOME names the peer it meant to reach. Both sides bound the handshake by Config.HandshakeTimeout. A
// writer that shuts down sends a CLOSE frame first.
//
// # Bad input
//
// Malformed, oversized, corrupted or foreign input ends the connection it
// came on, never the transport: the connection is dropped, the reason is
// counted (Stats.Rejected for handshakes, Stats.ConnErrors afterwards) and
// logged at most once per peer (or remote host) and reason per
// Config.LogEvery. A node accepts from clients only MULTICAST, VIEW_REQUEST
// and READ messages, and from nobody durable records.
//
// # Security
//
// With Config.TLS every connection is mutual TLS 1.3 and each side is bound
// to the identity its certificate names: the dialer checks it reached the
// node it dialed, the acceptor that the HELLO's role and id are the
// certificate's (see tls.go). Traffic is then encrypted and
// integrity-protected. The cluster key (Config.Key) is the simple mode:
// both ends of every connection prove they hold it (see handshake.go), so
// a process without the key cannot join, but any key holder can claim any
// id, and frames are neither encrypted nor MACed. With neither, anyone who
// can reach the port and knows the cluster name and a node id can join.
//
// # Not here yet
//
// No separate connection for bulk state transfer. Membership gossip
// travels as ordinary messages (wire.GOSSIP).
package transport
