package sim

import "github.com/weft-dev/weft/wire"

// The simulator's events, the arena holding their messages, and the event
// queue.

type evKind uint8

const (
	evMsg evKind = iota
	evIssue
	evTick
	evFault // a random fault of kind arg (the nemesis)
	evScript
	evHeal      // partition arg ends
	evSpikeEnd  // spike arg ends
	evRestart   // replica to restarts if still in incarnation arg
	evTornLimit // replica to crashes now if its torn crash (incarnation arg) has not struck
	evGST
	evHandle // a message that waited in its replica's queue (Config.ServiceTime) is handled
	// evClientCrash: closed-loop client arg crashes and restarts with its
	// session's last message in flight (Workload.CrashClients).
	evClientCrash
	// evSync: replica to's sync (Config.Pipeline) ends, if it is still in
	// incarnation arg.
	evSync
)

// event is pointer-free, so the queue costs the garbage collector nothing
// and moving events in the heap needs no write barriers: an evMsg's encoded
// message lives in the arena.
type event struct {
	at    int64
	seq   uint64
	arg   int32 // evIssue: client index or script index; see evKind
	from  wire.ProcID
	to    wire.ProcID
	epoch uint32 // evMsg: the link's epoch when sent (link resets)
	chunk uint32 // evMsg: arena chunk, offset and length of the encoded message
	off   uint32
	n     uint32
	kind  evKind
	fg    bool // workload traffic: not caused by a tick, restart or fault
}

// arena holds the encoded messages in flight in chunks of about chunkSize
// bytes, each released (for reuse) once no event refers to it.
type arena struct {
	chunks [][]byte // nil once released
	live   []int32  // per chunk: events referring to it
	free   [][]byte
}

const chunkSize = 64 << 10

// add encodes m into the current chunk and returns where it is.
func (a *arena) add(m wire.Message) (chunk, off, n uint32) {
	if len(a.chunks) == 0 || len(a.chunks[len(a.chunks)-1]) >= chunkSize {
		var b []byte
		if k := len(a.free); k > 0 {
			b, a.free = a.free[k-1], a.free[:k-1]
		}
		a.chunks = append(a.chunks, b)
		a.live = append(a.live, 0)
	}
	c := len(a.chunks) - 1
	start := len(a.chunks[c])
	a.chunks[c] = wire.Append(a.chunks[c], m)
	a.live[c]++
	return uint32(c), uint32(start), uint32(len(a.chunks[c]) - start)
}

func (a *arena) bytes(ev *event) []byte {
	return a.chunks[ev.chunk][ev.off : ev.off+ev.n]
}

// done releases ev's reference to its chunk.
func (a *arena) done(ev *event) {
	c := int(ev.chunk)
	a.live[c]--
	if a.live[c] == 0 && c != len(a.chunks)-1 {
		a.free = append(a.free, a.chunks[c][:0])
		a.chunks[c] = nil
	}
}

// Event queue: a 4-ary min-heap on (at, seq). Four children per node halve
// the depth of a binary heap, and with it the moves of 64-byte events, which
// dominate when hundreds of thousands of messages are in flight.

func evLess(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (s *Sim) push(e event) {
	if e.fg {
		s.fg++
	}
	s.seq++
	e.seq = s.seq
	s.q = append(s.q, e)
	q := s.q
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !evLess(&e, &q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = e
}

func (s *Sim) pop() event {
	q := s.q
	top := q[0]
	n := len(q) - 1
	last := q[n]
	q[n] = event{}
	s.q = q[:n]
	q = q[:n]
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if evLess(&q[j], &q[m]) {
				m = j
			}
		}
		if !evLess(&q[m], &last) {
			break
		}
		q[i] = q[m]
		i = m
	}
	q[i] = last
	return top
}
