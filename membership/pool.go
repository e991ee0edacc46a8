package membership

// Pool recycles the digest and state lists of sent messages (see
// Config.Pool). It is not safe for concurrent use.
type Pool struct {
	digests [][]Digest
	states  [][]EndpointState
	added   []endpoint // apply's scratch
}

// maxPooledAdded bounds the scratch a Pool keeps for apply (records).
const maxPooledAdded = 1 << 16

// maxPooled bounds the lists a Pool keeps of each kind.
const maxPooled = 16

func (p *Pool) getDigests(n int) []Digest {
	if k := len(p.digests); k > 0 {
		d := p.digests[k-1]
		p.digests[k-1] = nil
		p.digests = p.digests[:k-1]
		if cap(d) >= n {
			return d[:0]
		}
	}
	return make([]Digest, 0, n)
}

func (p *Pool) getStates(n int) []EndpointState {
	if k := len(p.states); k > 0 {
		s := p.states[k-1]
		p.states[k-1] = nil
		p.states = p.states[:k-1]
		if cap(s) >= n {
			return s[:0]
		}
	}
	return make([]EndpointState, 0, n)
}

func (p *Pool) putDigests(d []Digest) {
	if cap(d) > 0 && len(p.digests) < maxPooled {
		p.digests = append(p.digests, d[:0])
	}
}

func (p *Pool) putStates(s []EndpointState) {
	if cap(s) > 0 && len(p.states) < maxPooled {
		clear(s) // drop references to app-state lists
		p.states = append(p.states, s[:0])
	}
}

func (p *Pool) recycle(m Message) {
	switch m := m.(type) {
	case *Syn:
		p.putDigests(m.Digests)
	case *Ack:
		p.putDigests(m.Requests)
		p.putStates(m.States)
	case *Ack2:
		p.putStates(m.States)
	}
}

// digestList returns an empty list for up to n digests.
func (n *Node) digestList(k int) []Digest {
	if n.pool != nil {
		return n.pool.getDigests(k)
	}
	return make([]Digest, 0, k)
}

// stateList returns an empty list for up to k states.
func (n *Node) stateList(k int) []EndpointState {
	if n.pool != nil {
		return n.pool.getStates(k)
	}
	return make([]EndpointState, 0, k)
}
