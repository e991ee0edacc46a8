package amcast

import "github.com/weft-dev/weft/wire"

// Readys whose sync waits (issue #14; docs/durability.md, "A leader's own
// sync, deferred").
//
// The Ready contract makes a process's records durable before anything
// that relies on them leaves it. A driver may instead write a Ready's
// records, send at once only what its protocol lets leave before the sync
// (ACCEPT, DELIVER, a client's answer for WbCast), step more input, and
// sync later, once for several Readys: a WbCast node does so for a
// leader's Readys that nobody waits on (node/pipeline.go), and the
// simulator for every Ready of a replica with pipelined storage
// (sim.Config.Pipeline). What such a Ready releases waits for the sync
// that covers its records: its other messages, its deliveries and its
// reads. Pipeline keeps what waits, in order; the driver writes, syncs
// and sends.
//
// Why it is safe, with WbCast (wbcast/pipeline.go): what leaves the
// process is what a driver syncing every Ready would let leave, only
// later. A message that waits leaves once its Ready's records, and every
// earlier Ready's, are durable; links stay FIFO, since a message to a
// recipient that something is held for is held behind it, early or not.
// What a crash loses is every record not yet durable, possibly those of
// several Readys whose early messages left: those messages promise
// nothing about the sender's durable state, whatever Ready they come
// from. And the core's own decisions may not rest on its own records
// before they are durable: a WbCast leader's own ACCEPT_ACK is a message
// it sends itself, which waits like any other ack. (A sync on a goroutine
// of its own, overlapping the loop, was measured slower on the 2-core
// machine, twice: docs/durability.md, "Tried: syncing off the loop".)

// PipelineBytes bounds what a Pipeline holds, in encoded bytes (messages
// and delivered payloads): a driver past it syncs (Full).
const PipelineBytes = 8 << 20

// Pending is what one Ready releases once its records are durable.
type Pending struct {
	// At is the driver's position after the Ready's records (a log
	// index): they are durable once the driver's sync covers At.
	At uint64
	// First is the position before them: its records are First+1 to At
	// (a delivery's Rec i is record First+1+i).
	First      uint64
	Messages   []wire.Envelope
	Deliveries []Delivery
	Reads      []ReadState
	bytes      int
}

// Pipeline holds what a driver's Readys release once their records are
// durable, oldest first. The zero value is not usable: see NewPipeline.
// Not safe for concurrent use.
type Pipeline struct {
	early   func(wire.Message) bool
	pending []Pending
	out     []Pending // Release's last result
	spare   []Pending // entries whose slices are reused
	peers   map[wire.ProcID]int
	bytes   int
	now     []wire.Envelope // Add's result
}

// NewPipeline returns an empty Pipeline. early names the messages that
// may leave before their Ready's records are durable (nil: none).
func NewPipeline(early func(wire.Message) bool) *Pipeline {
	return &Pipeline{early: early, peers: map[wire.ProcID]int{}}
}

// Len is the number of Readys held.
func (p *Pipeline) Len() int { return len(p.pending) }

// Bytes is what is held, in encoded bytes.
func (p *Pipeline) Bytes() int { return p.bytes }

// Full reports whether the driver should sync now and release what is
// held (PipelineBytes).
func (p *Pipeline) Full() bool { return p.bytes >= PipelineBytes }

// Add takes rd, whose records the driver has written (not yet synced) up
// to position at, and returns the messages that may leave now: those
// early names, to recipients nothing is held for, in rd's order. The rest
// of rd is held (copied: the driver may Advance at once) until Release
// covers at. at must not be below the previous Add's. The result is valid
// until the next call of Add.
func (p *Pipeline) Add(rd *Ready, at uint64) []wire.Envelope {
	if n := len(p.pending); n > 0 && at < p.pending[n-1].At {
		panic("amcast: Pipeline.Add with a position below the last one")
	}
	e := p.entry()
	e.At, e.First = at, at-uint64(len(rd.Persist))
	now := p.now[:0]
	for _, env := range rd.Messages {
		if p.early != nil && p.early(env.Msg) && p.peers[env.To] == 0 {
			now = append(now, env)
			continue
		}
		e.Messages = append(e.Messages, env)
		p.peers[env.To]++
		e.bytes += wire.Size(env.Msg)
	}
	for _, d := range rd.Deliveries {
		e.bytes += len(d.M.Payload) + 64
		e.Deliveries = append(e.Deliveries, d)
	}
	e.Reads = append(e.Reads, rd.Reads...)
	p.bytes += e.bytes
	p.pending = append(p.pending, e)
	p.now = now
	return now
}

// entry returns an empty Pending, with a spare one's slices if any.
func (p *Pipeline) entry() Pending {
	n := len(p.spare)
	if n == 0 {
		return Pending{}
	}
	e := p.spare[n-1]
	p.spare = p.spare[:n-1]
	return Pending{Messages: e.Messages[:0], Deliveries: e.Deliveries[:0], Reads: e.Reads[:0]}
}

// Release removes and returns, oldest first, the held Readys whose records
// a sync up to durable covers. The result is valid until the next call of
// Release or Reset.
func (p *Pipeline) Release(durable uint64) []Pending {
	p.recycle()
	k := 0
	for k < len(p.pending) && p.pending[k].At <= durable {
		k++
	}
	if k == 0 {
		return nil
	}
	p.out = append(p.out[:0], p.pending[:k]...)
	n := copy(p.pending, p.pending[k:])
	clear(p.pending[n:])
	p.pending = p.pending[:n]
	for i := range p.out {
		e := &p.out[i]
		p.bytes -= e.bytes
		for _, env := range e.Messages {
			if p.peers[env.To]--; p.peers[env.To] == 0 {
				delete(p.peers, env.To)
			}
		}
	}
	return p.out
}

// recycle keeps the slices of Release's last result for later entries.
func (p *Pipeline) recycle() {
	for i := range p.out {
		e := &p.out[i]
		clear(e.Messages)
		clear(e.Deliveries)
		clear(e.Reads)
		if len(p.spare) < 4 {
			p.spare = append(p.spare, *e)
		}
	}
	clear(p.out)
	p.out = p.out[:0]
}

// Reset forgets everything held, as a crash does.
func (p *Pipeline) Reset() {
	p.recycle()
	clear(p.pending)
	p.pending = p.pending[:0]
	clear(p.peers)
	p.bytes = 0
}

// Held returns what is held, oldest first, for reading only (a torn
// crash's durable deliveries): valid until the next call of Add, Release
// or Reset.
func (p *Pipeline) Held() []Pending { return p.pending }

// Holds reports whether anything is held for recipient to.
func (p *Pipeline) Holds(to wire.ProcID) bool { return p.peers[to] > 0 }
