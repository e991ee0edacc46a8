package membership

import (
	"cmp"
	"slices"
	"time"

	"github.com/weft-dev/weft/wire"
)

// Clock offsets. Generations are wall-clock seconds and departed records
// expire at wall-clock times, so a node whose clock is far off misjudges
// both (the seed's advice: watch clock skew). Every exchange is stamped
// with the driver's wall time (the now of Tick and Step), and each reply
// echoes the stamp of the message it answers, so the node that receives
// the reply has NTP's four times (RFC 5905, on-wire protocol):
//
//	t0 the SYN (or ACK) sent, this node's clock   (Times.Echo, checked against the pending exchange)
//	t1 it was received, the peer's clock          (Times.Recv)
//	t2 the reply was sent, the peer's clock       (Times.Sent)
//	t3 the reply was received, this node's clock  (now)
//
//	offset = ((t1 - t0) + (t2 - t3)) / 2   the peer's clock minus this node's
//	delay  = (t3 - t0) - (t2 - t1)         the round trip without the peer's hold time
//
// Whatever the split of the delay between the two legs, the true offset
// is within offset ± delay/2. The initiator measures with SYN/ACK, the
// responder with ACK/ACK2 (when there is one).
//
// Each peer's estimate is smoothed: the delay always, the offset only
// from samples whose delay is at most twice the smoothed delay plus a
// millisecond (a sample delayed by a pause or a queue carries a larger
// error, so NTP's clock filter prefers low-delay samples too). A peer is
// reported skewed (EventClockSkew) when its offset exceeds
// Config.ClockSkewThreshold by more than the uncertainty (delay/2), and
// cleared (EventClockSkewCleared) when it falls below 90% of the
// threshold. There is one estimate per known endpoint at most, dropped
// when the endpoint is evicted or restarts (a new process may run on
// another host).

// ClockOffset is the estimate of one peer's clock.
type ClockOffset struct {
	Node wire.ProcID
	// Offset is the peer's clock minus this node's (smoothed); Delay the
	// smoothed round trip, twice the bound on Offset's error.
	Offset, Delay time.Duration
	Samples       uint64
	// Skewed: the peer is reported beyond Config.ClockSkewThreshold.
	Skewed bool
}

type clockEntry struct {
	id      wire.ProcID
	skewed  bool
	samples uint64
	offset  int64 // ns
	delay   int64 // ns
}

const (
	// clockGain is the smoothing: each sample moves the estimate by 1/4
	// of its difference (a few exchanges follow a clock step).
	clockGain = 4
	// clockSpikeSlack is added to twice the smoothed delay before a
	// sample counts as a spike (sub-millisecond jitter on a LAN is not).
	clockSpikeSlack = int64(time.Millisecond)
	// generationSlack: a generation is max(stored+1, now in seconds), so
	// a node restarted twice within a second runs up to a second ahead
	// of its start without any skew.
	generationSlack = int64(time.Second)
)

// replyTimes stamps a reply to a message sent at echo, received and
// answered at now. Unstamped (zero) if either is unknown.
func replyTimes(now, echo int64) Times {
	if now <= 0 || echo <= 0 {
		return Times{}
	}
	return Times{Echo: echo, Recv: now, Sent: now}
}

// clockSample takes the stamps of a reply from peer received at now that
// answered the exchange this node opened at `at`.
func (n *Node) clockSample(now int64, peer wire.ProcID, at int64, t Times) {
	if n.cfg.ClockSkewThreshold <= 0 || t == (Times{}) || now <= 0 {
		return
	}
	if t.Echo != at {
		// The reply answers another exchange than the one it was matched
		// to (late or forged): its t0 is unknown.
		n.stats.ClockUnmatched++
		return
	}
	rtt, hold := now-at, t.Sent-t.Recv // hold >= 0: validated
	if rtt < 0 || rtt < hold {
		// This node's clock stepped back during the exchange, or the
		// peer claims to have held the message longer than the round
		// trip took: no bound on the offset.
		n.stats.ClockNegative++
		return
	}
	delay := rtt - hold
	// Halves first: every stamp is in [1, MaxInt64], so each difference
	// fits an int64 and so does the sum of their halves.
	offset := (t.Recv-at)/2 + (t.Sent-now)/2
	if n.find(peer) < 0 {
		return // refused by the view (state limit): keep nothing about it
	}
	i, ok := slices.BinarySearchFunc(n.clocks, peer, func(c clockEntry, id wire.ProcID) int { return cmp.Compare(c.id, id) })
	if !ok {
		n.clocks = slices.Insert(n.clocks, i, clockEntry{id: peer, offset: offset, delay: delay, samples: 1})
		n.stats.ClockSamples++
		n.judgeClock(&n.clocks[i])
		return
	}
	c := &n.clocks[i]
	n.stats.ClockSamples++
	c.samples++
	if delay > 2*c.delay+clockSpikeSlack {
		n.stats.ClockSpikes++
	} else {
		c.offset += (offset - c.offset) / clockGain
	}
	c.delay += (delay - c.delay) / clockGain
	n.judgeClock(c)
}

// judgeClock reports a peer crossing the skew threshold.
func (n *Node) judgeClock(c *clockEntry) {
	limit := int64(n.cfg.ClockSkewThreshold)
	abs := c.offset
	if abs < 0 {
		abs = -abs
	}
	switch {
	case !c.skewed && abs-c.delay/2 > limit:
		c.skewed = true
		n.emit(Event{Kind: EventClockSkew, Node: c.id, Offset: time.Duration(c.offset)})
	case c.skewed && abs < limit/10*9:
		c.skewed = false
		n.emit(Event{Kind: EventClockSkewCleared, Node: c.id, Offset: time.Duration(c.offset)})
	}
}

// dropClock forgets peer's estimate (evicted or restarted).
func (n *Node) dropClock(peer wire.ProcID) {
	if i, ok := slices.BinarySearchFunc(n.clocks, peer, func(c clockEntry, id wire.ProcID) int { return cmp.Compare(c.id, id) }); ok {
		n.clocks = slices.Delete(n.clocks, i, i+1)
	}
}

// checkGeneration reports a new generation of node more than
// ClockSkewThreshold (plus generationSlack) ahead of this node's clock:
// the node started at a time this node's clock has not reached, so one
// of the two clocks is off. The generation is accepted all the same
// (MaxGenerationAhead is the guard that refuses).
func (n *Node) checkGeneration(now int64, node wire.ProcID, gen uint64) {
	limit := int64(n.cfg.ClockSkewThreshold)
	if limit <= 0 || now <= 0 || gen > uint64(1<<63-1)/1e9 {
		return // tooFarAhead has refused larger ones already
	}
	if ahead := int64(gen)*1e9 - now; ahead > limit+generationSlack {
		n.stats.GenerationsAhead++
		n.emit(Event{Kind: EventGenerationAhead, Node: node, Generation: gen, Offset: time.Duration(ahead)})
	}
}

// ClockOffset returns the estimate of peer's clock.
func (n *Node) ClockOffset(peer wire.ProcID) (ClockOffset, bool) {
	i, ok := slices.BinarySearchFunc(n.clocks, peer, func(c clockEntry, id wire.ProcID) int { return cmp.Compare(c.id, id) })
	if !ok {
		return ClockOffset{}, false
	}
	return n.clocks[i].public(), true
}

// ClockOffsets returns every estimate, sorted by node.
func (n *Node) ClockOffsets() []ClockOffset {
	out := make([]ClockOffset, len(n.clocks))
	for i := range n.clocks {
		out[i] = n.clocks[i].public()
	}
	return out
}

func (c *clockEntry) public() ClockOffset {
	return ClockOffset{Node: c.id, Offset: time.Duration(c.offset), Delay: time.Duration(c.delay), Samples: c.samples, Skewed: c.skewed}
}
