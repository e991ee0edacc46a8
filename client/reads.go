package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/weft-dev/weft/wire"
)

// Reads without a multicast (READ, docs/reads.md): Read sends a query to
// one group's state machine (rsm.Querier) and returns its result.
//
//   - wire.ReadLinearizable goes to the client's view of the group's
//     leader, which serves it through a read index confirmed by a quorum:
//     the result reflects every write completed before Read was called.
//     A NOT_LEADER answer (with the node's leader hint) or no answer
//     within RetryTicks sends it again, to the hint or to the next member,
//     until ctx ends: reads change nothing, so retries are always safe.
//   - wire.ReadLocal goes to one member (a random one first, the next on
//     a retry) and is answered from that member's state as is: possibly
//     stale; ReadResult.Index says how far that state is.
//
// An OVERLOADED answer ends the read with ErrOverloaded (back off); a
// FAILED one with ErrReadFailed (the query failed, or the group serves no
// queries), which retrying does not help.

// ErrReadFailed is returned by Read when a node could not serve the query
// (its reason follows): the query failed, the nodes run no state machine
// that answers queries, or their protocol serves no read index.
var ErrReadFailed = errors.New("client: read failed")

// ReadResult is the outcome of one Read.
type ReadResult struct {
	Group wire.GroupID
	// Index is the applied position the query ran at: the gts of the last
	// delivery in the state it read.
	Index wire.Timestamp
	// Node is the replica that answered.
	Node    wire.ProcID
	Result  []byte
	Latency time.Duration
}

type readReq struct {
	g       wire.GroupID
	mode    wire.ReadMode
	query   []byte
	ctx     context.Context
	reply   chan readAnswer
	start   time.Time
	id      wire.MsgID
	to      wire.ProcID
	sentAt  int // tick
	attempt int
	parked  bool // send to `to` at the next tick (reads.go: NOT_LEADER loops)
}

type readAnswer struct {
	res ReadResult
	err error
}

// Read runs query on group g's state machine with the given consistency
// (wire.ReadLinearizable or wire.ReadLocal) and returns its result.
func (c *Client) Read(ctx context.Context, g wire.GroupID, query []byte, mode wire.ReadMode) (ReadResult, error) {
	if int(g) >= c.cfg.Topology.NumGroups() {
		return ReadResult{}, fmt.Errorf("client: no group %d (the cluster has %d)", g, c.cfg.Topology.NumGroups())
	}
	if mode != wire.ReadLinearizable && mode != wire.ReadLocal {
		return ReadResult{}, fmt.Errorf("client: read mode %d is neither linearizable nor local", mode)
	}
	if len(query) > wire.MaxPayload {
		return ReadResult{}, fmt.Errorf("client: query of %d bytes, over the limit of %d", len(query), wire.MaxPayload)
	}
	r := &readReq{g: g, mode: mode, query: query, ctx: ctx, reply: make(chan readAnswer, 1)}
	if err := c.enter(ctx); err != nil {
		return ReadResult{}, err
	}
	c.submitRead(r)
	c.lk.Unlock()
	a, err := wait(ctx, r.reply) // on ctx's end the next tick drops r
	if err != nil {
		return ReadResult{}, err
	}
	return a.res, a.err
}

// submitRead sends a new read (under lk).
func (c *Client) submitRead(r *readReq) {
	c.rseq++
	r.id = wire.MsgID{Client: c.cfg.ID, Session: c.cfg.Session, Seq: c.rseq}
	r.start = time.Now()
	r.to = c.m.Leader(r.g)
	if r.mode == wire.ReadLocal {
		ms := c.cfg.Topology.Members(r.g)
		r.to = ms[rand.IntN(len(ms))]
	}
	c.reads[r.id.Seq] = r
	c.sendRead(r)
}

func (c *Client) sendRead(r *readReq) {
	r.sentAt = c.ticks
	r.attempt++
	c.tr.Send(r.to, &wire.Read{ID: r.id, G: r.g, Mode: r.mode, Query: r.query})
}

// nextMember returns the member of g after p, in group order.
func (c *Client) nextMember(g wire.GroupID, p wire.ProcID) wire.ProcID {
	ms := c.cfg.Topology.Members(g)
	for i, q := range ms {
		if q == p {
			return ms[(i+1)%len(ms)]
		}
	}
	return ms[0]
}

// readReply handles a READ_REPLY (under lk).
func (c *Client) readReply(from wire.ProcID, rr *wire.ReadReply) {
	r := c.reads[rr.ID.Seq]
	if r == nil || rr.ID != r.id || from != r.to {
		return // answered already, or an earlier attempt's answer
	}
	switch rr.Status {
	case wire.ReadOK:
		c.endRead(r, readAnswer{res: ReadResult{Group: r.g, Index: rr.Index, Node: from, Result: rr.Result, Latency: time.Since(r.start)}})
	case wire.ReadOverloaded:
		c.endRead(r, readAnswer{err: fmt.Errorf("%w: read %s at p%d: %s", ErrOverloaded, r.id, from, rr.Err)})
	case wire.ReadFailed:
		c.endRead(r, readAnswer{err: fmt.Errorf("%w: at p%d: %s", ErrReadFailed, from, rr.Err)})
	default: // NOT_LEADER: to its hint, if it names another member of g
		next := c.nextMember(r.g, from)
		if hg, ok := c.cfg.Topology.GroupOf(rr.Leader); ok && hg == r.g && rr.Leader != from {
			next = rr.Leader
			if c.m.SetLeader(r.g, rr.Leader) == nil {
				c.mu.Lock()
				c.leaders[r.g] = rr.Leader
				c.mu.Unlock()
			}
		}
		r.to = next
		c.readRetry()
		if r.attempt%len(c.cfg.Topology.Members(r.g)) == 0 {
			// Every member said no in a row (an election): wait a tick
			// rather than bounce between them.
			r.parked = true
			return
		}
		c.sendRead(r)
	}
}

func (c *Client) endRead(r *readReq, a readAnswer) {
	delete(c.reads, r.id.Seq)
	r.reply <- a
}

func (c *Client) readRetry() {
	c.mu.Lock()
	c.readRetries++
	c.mu.Unlock()
}

// tickReads drops reads whose caller gave up and re-sends those not
// answered within RetryTicks to the next member (on every tick).
func (c *Client) tickReads() {
	for _, r := range c.reads {
		if r.ctx.Err() != nil {
			delete(c.reads, r.id.Seq)
			continue
		}
		if r.parked {
			r.parked = false
			c.sendRead(r)
			continue
		}
		if c.ticks >= r.sentAt+c.cfg.RetryTicks {
			r.to = c.nextMember(r.g, r.to)
			c.readRetry()
			c.sendRead(r)
		}
	}
}

// ReadRetries returns how many times the client re-sent a read.
func (c *Client) ReadRetries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readRetries
}
