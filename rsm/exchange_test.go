package rsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// purse is a test Exchanger: one balance per group. A payload to several
// groups is "take 1 from each destination group's balance, only if every
// balance stays non-negative": each group votes whether its own balance
// can pay, and the entry commits iff every vote is yes. A payload to one
// group adds its first byte. Apply answers "ok" or "no".
type purse struct {
	g       wire.GroupID
	balance int64
	log     []string // outcome per entry, in order
	// firstVotes: only an entry's first destination votes (the others'
	// parts cannot fail); otherwise every destination does.
	firstVotes bool
}

func (p *purse) Voters(e Entry) []wire.GroupID {
	if p.firstVotes {
		return e.Dest[:1]
	}
	return e.Dest
}

func (p *purse) Vote(e Entry) []byte {
	if p.balance >= 1 {
		return []byte{1}
	}
	return []byte{0}
}

func (p *purse) Apply(batch []Entry) ([][]byte, error) {
	out := make([][]byte, len(batch))
	for i, e := range batch {
		if len(e.Dest) == 1 {
			p.balance += int64(e.Payload[0])
			out[i] = []byte("ok")
			continue
		}
		if len(e.Votes) != len(e.Dest) {
			return nil, fmt.Errorf("entry %s to %v reached Apply with %d votes", e.ID, e.Dest, len(e.Votes))
		}
		ok := true
		for i, v := range e.Votes {
			if voter := !p.firstVotes || i == 0; voter != (v != nil) {
				return nil, fmt.Errorf("entry %s: group %d's vote is %v, voter %v", e.ID, e.Dest[i], v, voter)
			}
			ok = ok && (v == nil || bytes.Equal(v, []byte{1}))
		}
		if ok {
			p.balance--
			out[i] = []byte("ok")
		} else {
			out[i] = []byte("no")
		}
		p.log = append(p.log, fmt.Sprintf("%s:%s", e.ID, out[i]))
	}
	return out, nil
}

func (p *purse) Snapshot(w io.Writer) error {
	_, err := w.Write(binary.AppendVarint(nil, p.balance))
	return err
}

func (p *purse) Restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	v, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return errors.New("bad purse")
	}
	p.balance = v
	return nil
}

func newPurse(t testing.TB, g wire.GroupID, cfg Config) (*Driver, *purse) {
	t.Helper()
	p := &purse{g: g}
	cfg.Group = g
	d, err := NewDriver(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d, p
}

func ent(seq uint64, t uint64, payload byte, dest ...wire.GroupID) Entry {
	return Entry{ID: wire.MsgID{Client: 50, Seq: seq}, Dest: dest, Payload: []byte{payload}, GTS: wire.Timestamp{T: t}}
}

// TestExchangeHoldsUntilVotes: an entry to two groups waits for the other
// group's vote, with every entry after it; this group's vote is cast on
// the state after the entries before it; the vote lets everything through.
func TestExchangeHoldsUntilVotes(t *testing.T) {
	d, p := newPurse(t, 0, Config{})
	if err := d.Apply([]Entry{ent(1, 1, 1, 0), ent(2, 2, 0, 0, 1), ent(3, 3, 5, 0)}); err != nil {
		t.Fatal(err)
	}
	if d.Applied() != (wire.Timestamp{T: 1}) || d.Received() != (wire.Timestamp{T: 3}) || p.balance != 1 {
		t.Fatalf("applied %s received %s balance %d, want 1, 3, 1 (entry 1 applied, 2 and 3 held)", d.Applied(), d.Received(), p.balance)
	}
	id, gts, missing, ok := d.Waiting()
	if !ok || id.Seq != 2 || gts.T != 2 || !slices.Equal(missing, []wire.GroupID{1}) {
		t.Fatalf("Waiting = %s %s %v %v", id, gts, missing, ok)
	}
	if n, b := d.Backlog(); n != 2 || b <= 0 {
		t.Fatalf("backlog %d entries %d bytes", n, b)
	}
	vs := d.TakeVotes()
	if len(vs) != 1 || vs[0].G != 0 || !slices.Equal(vs[0].To, []wire.GroupID{1}) || !bytes.Equal(vs[0].Vote, []byte{1}) {
		t.Fatalf("votes cast %+v, want one yes of g0 to g1 (the balance was 1 after entry 1)", vs)
	}
	if len(d.TakeVotes()) != 0 {
		t.Fatal("TakeVotes returned the same votes twice")
	}
	// Its own vote is served to pulls while held.
	if v, ok := d.VoteOf(id, 0); !ok || !bytes.Equal(v.Vote, []byte{1}) {
		t.Fatalf("VoteOf own = %+v %v", v, ok)
	}
	if err := d.AddVote(Vote{ID: id, GTS: gts, G: 1, Vote: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if d.Applied() != (wire.Timestamp{T: 3}) || p.balance != 5 {
		t.Fatalf("after the vote: applied %s balance %d, want 3 and 5", d.Applied(), p.balance)
	}
	if _, _, _, ok := d.Waiting(); ok {
		t.Fatal("still waiting")
	}
	if r, ok := d.Result(id); !ok || string(r) != "ok" {
		t.Fatalf("result %q %v", r, ok)
	}
	// Both votes stay in the cache for pulls.
	if v, ok := d.VoteOf(id, 1); !ok || !bytes.Equal(v.Vote, []byte{1}) || v.GTS != gts {
		t.Fatalf("VoteOf g1 after apply = %+v %v", v, ok)
	}
	if n, b := d.Backlog(); n != 0 || b != 0 {
		t.Fatalf("backlog %d entries %d bytes after everything applied", n, b)
	}
}

// TestExchangeOnlyVotersHold: when only an entry's first destination
// votes, that group applies it at once (casting its vote for the others)
// and the other group holds it until the vote comes; a vote of a group
// that is not a voter is refused.
func TestExchangeOnlyVotersHold(t *testing.T) {
	d0, p0 := newPurse(t, 0, Config{})
	d1, p1 := newPurse(t, 1, Config{})
	p0.firstVotes, p1.firstVotes = true, true
	p0.balance, p1.balance = 1, 0 // g1 could not pay: its part does not count
	e := ent(1, 1, 0, 0, 1)
	for _, d := range []*Driver{d0, d1} {
		if err := d.Apply([]Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	if d0.Applied() != e.GTS {
		t.Fatal("the only voter waited")
	}
	vs := d0.TakeVotes()
	if len(vs) != 1 || !slices.Equal(vs[0].To, []wire.GroupID{1}) || len(d1.TakeVotes()) != 0 {
		t.Fatalf("votes %+v: want g0's alone, to g1", vs)
	}
	if _, _, missing, ok := d1.Waiting(); !ok || !slices.Equal(missing, []wire.GroupID{0}) {
		t.Fatalf("g1 waits for %v (%v), want g0", missing, ok)
	}
	if err := d1.AddVote(Vote{ID: e.ID, GTS: e.GTS, G: 0, Vote: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if d1.Applied() != e.GTS || p1.balance != -1 || p0.balance != 0 {
		t.Fatalf("after g0's vote: g1 applied %s, balances %d %d", d1.Applied(), p0.balance, p1.balance)
	}
	// To three groups, g0 voting alone: g2's vote is refused at g1, once
	// the message is held; arrived before, it is dropped when the message
	// comes, and never reaches Apply (purse fails on a non-voter's vote).
	e2, e3 := ent(2, 2, 0, 0, 1, 2), ent(3, 3, 0, 0, 1, 2)
	if err := d1.AddVote(Vote{ID: e3.ID, GTS: e3.GTS, G: 2, Vote: []byte{1}}); err != nil {
		t.Fatalf("an early vote: %v", err)
	}
	if err := d1.Apply([]Entry{e2, e3}); err != nil {
		t.Fatal(err)
	}
	if err := d1.AddVote(Vote{ID: e2.ID, GTS: e2.GTS, G: 2, Vote: []byte{1}}); !errors.Is(err, ErrVoteNotDest) {
		t.Fatalf("a non-voter's vote: %v, want ErrVoteNotDest", err)
	}
	for _, e := range []Entry{e2, e3} {
		if err := d1.AddVote(Vote{ID: e.ID, GTS: e.GTS, G: 0, Vote: []byte{1}}); err != nil {
			t.Fatal(err)
		}
	}
	if d1.Applied() != e3.GTS || d1.Err() != nil {
		t.Fatalf("applied %s, err %v", d1.Applied(), d1.Err())
	}
}

// TestExchangeRefusesContradictions: votes that contradict the driver's
// knowledge are refused with a reason and counted; applied ones ignored.
func TestExchangeRefusesContradictions(t *testing.T) {
	d, _ := newPurse(t, 0, Config{MaxEarlyVotes: 2})
	if err := d.Apply([]Entry{ent(1, 5, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	held := wire.MsgID{Client: 50, Seq: 1}
	cases := []struct {
		v    Vote
		want error
	}{
		{Vote{ID: held, GTS: wire.Timestamp{T: 5}, G: 2, Vote: []byte{1}}, ErrVoteNotDest}, // g2 is not a destination
		{Vote{ID: held, GTS: wire.Timestamp{T: 6}, G: 1, Vote: []byte{1}}, ErrVoteNotDest}, // delivered here at 5
		{Vote{ID: held, GTS: wire.Timestamp{T: 5}, G: 1, Vote: make([]byte, MaxVote+1)}, ErrVoteTooLarge},
		{Vote{ID: wire.MsgID{Seq: 9}, GTS: wire.Timestamp{T: 9}, G: 1, Vote: []byte{1}}, nil}, // early
		{Vote{ID: wire.MsgID{Seq: 9}, GTS: wire.Timestamp{T: 9}, G: 1, Vote: []byte{0}}, ErrVoteConflict},
		{Vote{ID: wire.MsgID{Seq: 10}, GTS: wire.Timestamp{T: 10}, G: 1, Vote: []byte{1}}, nil}, // early, the second
		{Vote{ID: wire.MsgID{Seq: 11}, GTS: wire.Timestamp{T: 11}, G: 1, Vote: []byte{1}}, ErrVoteFull},
		{Vote{ID: wire.MsgID{Seq: 3}, GTS: wire.Timestamp{T: 2}, G: 1, Vote: []byte{1}}, nil}, // below received, not held: ignored
	}
	for i, c := range cases {
		err := d.AddVote(c.v)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("case %d: AddVote = %v, want %v", i, err, c.want)
		}
	}
	if st := d.Stats(); st.VotesRefused != 5 {
		t.Fatalf("VotesRefused %d, want 5", st.VotesRefused)
	}
	if _, _, _, ok := d.Waiting(); !ok || d.Applied() != (wire.Timestamp{}) {
		t.Fatal("a refused vote let the held entry through")
	}
	// Once the replica passes the early votes' gts without holding their
	// messages, they are swept to make room.
	if err := d.AddVote(Vote{ID: held, GTS: wire.Timestamp{T: 5}, G: 1, Vote: []byte{0}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply([]Entry{ent(4, 20, 1, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddVote(Vote{ID: wire.MsgID{Seq: 30}, GTS: wire.Timestamp{T: 30}, G: 1, Vote: []byte{1}}); err != nil {
		t.Fatalf("early vote after the stale ones passed: %v", err)
	}
}

// TestExchangeSnapshotCarriesHeld: a snapshot taken while entries are held
// carries them; the restored driver casts its vote again and applies them
// once the other group's vote comes, to the same state.
func TestExchangeSnapshotCarriesHeld(t *testing.T) {
	d, _ := newPurse(t, 1, Config{})
	batch := []Entry{ent(1, 1, 3, 1), ent(2, 2, 0, 0, 1), ent(3, 3, 4, 1)}
	if err := d.Apply(batch); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := d.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	d2, p2 := newPurse(t, 1, Config{})
	if err := d2.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if d2.Received() != d.Received() || d2.Applied() != d.Applied() {
		t.Fatalf("restored received %s applied %s, want %s %s", d2.Received(), d2.Applied(), d.Received(), d.Applied())
	}
	if vs := d2.TakeVotes(); len(vs) != 1 || vs[0].ID.Seq != 2 {
		t.Fatalf("restored driver cast %+v, want its vote on entry 2 again", vs)
	}
	// The log replays the same entries after a restart: skipped.
	if err := d2.Apply(batch); err != nil || d2.Stats().Skipped != 3 {
		t.Fatalf("replay: %v, skipped %d", err, d2.Stats().Skipped)
	}
	for _, x := range []*Driver{d, d2} {
		if err := x.AddVote(Vote{ID: batch[1].ID, GTS: batch[1].GTS, G: 0, Vote: []byte{1}}); err != nil {
			t.Fatal(err)
		}
	}
	if d2.Applied() != (wire.Timestamp{T: 3}) || p2.balance != 6 {
		t.Fatalf("restored: applied %s balance %d, want 3 and 6", d2.Applied(), p2.balance)
	}
	// A truncated held section is refused.
	raw := buf.Bytes()
	for _, cut := range []int{len(raw) / 2, len(raw) - 5} {
		d3, _ := newPurse(t, 1, Config{})
		if err := d3.Restore(bytes.NewReader(raw[:cut])); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("truncated at %d: %v", cut, err)
		}
	}
}

// TestExchangeVoteCacheBounded: the votes kept for pulls are the last
// VoteCache messages', and, past them, those of messages a destination
// group has not applied yet (NoteApplied), at most MaxVotesKept of them.
func TestExchangeVoteCacheBounded(t *testing.T) {
	d, _ := newPurse(t, 0, Config{VoteCache: 3, MaxVotesKept: 2})
	kept := func(want ...uint64) {
		t.Helper()
		for i := uint64(1); i <= 6; i++ {
			_, ok := d.VoteOf(wire.MsgID{Client: 50, Seq: i}, 1)
			if ok != slices.Contains(want, i) {
				t.Errorf("VoteOf message %d: %v, want kept %v", i, ok, want)
			}
		}
	}
	for i := uint64(1); i <= 5; i++ {
		e := ent(i, i, 0, 0, 1)
		if err := d.Apply([]Entry{e}); err != nil {
			t.Fatal(err)
		}
		if err := d.AddVote(Vote{ID: e.ID, GTS: e.GTS, G: 1, Vote: []byte{0}}); err != nil {
			t.Fatal(err)
		}
	}
	// No group said it applied anything: 1 and 2 are kept past the cache.
	kept(1, 2, 3, 4, 5)
	if st := d.Stats(); st.VotesKept != 2 || st.VotesDropped != 0 {
		t.Errorf("stats %+v: want 2 kept, none dropped", st)
	}
	// Group 1 applied through 1, group 0 (this one) through everything:
	// 1 is forgotten, 2 kept for group 1.
	d.NoteApplied(1, wire.Timestamp{T: 1})
	d.NoteApplied(0, wire.Timestamp{T: 5})
	kept(2, 3, 4, 5)
	d.NoteApplied(1, wire.Timestamp{T: 1}) // not higher: nothing changes
	kept(2, 3, 4, 5)
	// Two more messages leave the ring while group 1 is behind: kept, and
	// past MaxVotesKept the oldest kept is dropped, counted.
	for i := uint64(6); i <= 7; i++ {
		e := ent(i, i, 0, 0, 1)
		if err := d.Apply([]Entry{e}); err != nil {
			t.Fatal(err)
		}
		if err := d.AddVote(Vote{ID: e.ID, GTS: e.GTS, G: 1, Vote: []byte{0}}); err != nil {
			t.Fatal(err)
		}
	}
	kept(3, 4, 5, 6)
	if st := d.Stats(); st.VotesKept != 2 || st.VotesDropped != 1 {
		t.Errorf("stats %+v: want 2 kept, 1 dropped", st)
	}
	// Group 1 catches up: only the ring's remain.
	d.NoteApplied(1, wire.Timestamp{T: 7})
	kept(5, 6)
	if st := d.Stats(); st.VotesKept != 0 {
		t.Errorf("stats %+v: want none kept past the ring", st)
	}
	if d.Applied() != (wire.Timestamp{T: 7}) {
		t.Fatalf("applied %s", d.Applied())
	}
}

// TestExchangeNoDeadlock: three groups, random messages to random sets of
// them in one global order; each group's replica receives its deliveries in
// order but at random moments, interleaved with the votes, which travel
// in random order. Every replica ends having applied every delivery, and
// the groups agree on every outcome (the argument in exchange.go).
func TestExchangeNoDeadlock(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		const groups = 3
		var ds [groups]*Driver
		var ps [groups]*purse
		var queue [groups][]Entry
		for g := range groups {
			ds[g], ps[g] = newPurse(t, wire.GroupID(g), Config{})
		}
		for i := uint64(1); i <= 60; i++ {
			var dest []wire.GroupID
			for g := range groups {
				if r.IntN(2) == 0 {
					dest = append(dest, wire.GroupID(g))
				}
			}
			if len(dest) == 0 {
				dest = []wire.GroupID{wire.GroupID(r.IntN(groups))}
			}
			e := ent(i, i, byte(r.IntN(2)), dest...)
			for _, g := range dest {
				queue[g] = append(queue[g], e)
			}
		}
		var inflight []Vote
		for steps := 0; ; steps++ {
			if steps > 100000 {
				t.Fatalf("seed %d: no progress", seed)
			}
			var moves []int // 0..2: deliver to group; 3: deliver a vote
			for g := range groups {
				if len(queue[g]) > 0 {
					moves = append(moves, g)
				}
			}
			if len(inflight) > 0 {
				moves = append(moves, 3)
			}
			if len(moves) == 0 {
				break
			}
			switch m := moves[r.IntN(len(moves))]; m {
			case 3:
				i := r.IntN(len(inflight))
				v := inflight[i]
				inflight = slices.Delete(inflight, i, i+1)
				for _, g := range v.To {
					if err := ds[g].AddVote(v); err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
				}
			default:
				n := 1 + r.IntN(len(queue[m]))
				if err := ds[m].Apply(queue[m][:n]); err != nil {
					t.Fatal(err)
				}
				queue[m] = queue[m][n:]
			}
			for g := range groups {
				inflight = append(inflight, ds[g].TakeVotes()...)
			}
		}
		for g := range groups {
			if _, _, missing, ok := ds[g].Waiting(); ok {
				t.Fatalf("seed %d: g%d still waits for %v with every vote delivered", seed, g, missing)
			}
		}
		// Every group's outcome of a shared message is the same.
		outcome := map[string]string{}
		for g := range groups {
			for _, l := range ps[g].log {
				id, res := l[:len(l)-3], l[len(l)-2:]
				if o, ok := outcome[id]; ok && o != res {
					t.Fatalf("seed %d: %s is %s at g%d but %s elsewhere", seed, id, res, g, o)
				}
				outcome[id] = res
			}
		}
	}
}

// FuzzAddVote: arbitrary votes from arbitrary groups, against a driver
// holding entries, never panic; whatever they say, an entry is applied
// only with one vote per destination group, and the driver stays usable.
func FuzzAddVote(f *testing.F) {
	f.Add([]byte{1, 2, 1, 1, 3, 0, 2, 9, 2, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, _ := newPurse(t, 0, Config{MaxEarlyVotes: 4, VoteCache: 2})
		if err := d.Apply([]Entry{ent(1, 2, 1, 0), ent(2, 3, 0, 0, 1), ent(3, 4, 0, 0, 2), ent(4, 5, 0, 0, 1, 2)}); err != nil {
			t.Fatal(err)
		}
		for len(b) >= 4 {
			v := Vote{ID: wire.MsgID{Client: 50, Seq: uint64(b[0] % 6)}, GTS: wire.Timestamp{T: uint64(b[1] % 8)}, G: wire.GroupID(b[2] % 4)}
			n := int(b[3] % 3)
			b = b[4:]
			v.Vote = b[:min(n, len(b))]
			b = b[len(v.Vote):]
			_ = d.AddVote(v) // refusals are expected
			if d.Err() != nil {
				t.Fatalf("the driver failed on a remote vote: %v", d.Err())
			}
		}
	})
}

// TestExchangeSnapshotCarriesVotes: the votes kept for pulls travel in the
// snapshot (format WEFTRSM5), so a replica restarted from it, or a member
// that installed it, still answers pulls for them; a restored driver keeps
// them whatever its VoteCache (no group has told it what it applied) and
// forgets them as groups apply; a snapshot of an earlier format is
// refused.
func TestExchangeSnapshotCarriesVotes(t *testing.T) {
	d, _ := newPurse(t, 0, Config{VoteCache: 3})
	for i := uint64(1); i <= 5; i++ {
		e := ent(i, i, 0, 0, 1)
		if err := d.Apply([]Entry{e}); err != nil {
			t.Fatal(err)
		}
		if err := d.AddVote(Vote{ID: e.ID, GTS: e.GTS, G: 1, Vote: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	d.NoteApplied(0, wire.Timestamp{T: 5})
	d.NoteApplied(1, wire.Timestamp{T: 1}) // 1 forgotten, 2 kept past the ring
	var buf bytes.Buffer
	if err := d.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	all := []uint64{2, 3, 4, 5}
	for _, tc := range []struct {
		cache int
		kept  []uint64 // after the restore
		after []uint64 // after every group applied through 6
	}{{3, all, []uint64{4, 5, 6}}, {2, all, []uint64{5, 6}}, {10, all, []uint64{2, 3, 4, 5, 6}}, {-1, nil, nil}} {
		d2, _ := newPurse(t, 0, Config{VoteCache: tc.cache})
		if err := d2.Restore(bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatalf("cache %d: %v", tc.cache, err)
		}
		check := func(want []uint64) {
			t.Helper()
			for i := uint64(1); i <= 6; i++ {
				id := wire.MsgID{Client: 50, Seq: i}
				v, ok := d2.VoteOf(id, 1)
				in := slices.Contains(want, i)
				if ok != in || (ok && (v.GTS != wire.Timestamp{T: i} || !bytes.Equal(v.Vote, []byte{byte(i)}))) {
					t.Errorf("cache %d: VoteOf(%d, g1) = %+v, %v; want kept %v", tc.cache, i, v, ok, in)
				}
				if own, ok := d2.VoteOf(id, 0); ok != in || (ok && !bytes.Equal(own.Vote, []byte{0})) {
					t.Errorf("cache %d: its own vote on %d: %+v, %v", tc.cache, i, own, ok)
				}
			}
		}
		check(tc.kept)
		e := ent(6, 6, 0, 0, 1)
		if err := d2.Apply([]Entry{e}); err != nil {
			t.Fatal(err)
		}
		if err := d2.AddVote(Vote{ID: e.ID, GTS: e.GTS, G: 1, Vote: []byte{6}}); err != nil {
			t.Fatal(err)
		}
		d2.NoteApplied(0, wire.Timestamp{T: 6})
		d2.NoteApplied(1, wire.Timestamp{T: 6})
		check(tc.after)
	}

	// A snapshot of an earlier format (64-bit sessions) is refused with
	// its header named, never read as this one.
	var old bytes.Buffer
	cw := &chunkWriter{w: &old}
	b := append([]byte("WEFTRSM4"), 5, 0, 5, 0, 0, 0) // applied 5.g0, count 5, no results, held or votes
	if _, err := cw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := cw.close(); err != nil {
		t.Fatal(err)
	}
	d3, _ := newPurse(t, 0, Config{VoteCache: 3})
	if err := d3.Restore(bytes.NewReader(old.Bytes())); !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "WEFTRSM4") {
		t.Errorf("WEFTRSM4: %v, want ErrBadSnapshot naming the header", err)
	}
	// A votes section cut short is refused.
	raw := buf.Bytes()
	for cut := len(raw) - 12; cut < len(raw); cut += 3 {
		d4, _ := newPurse(t, 0, Config{VoteCache: 3})
		if err := d4.Restore(bytes.NewReader(raw[:cut])); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("cut at %d of %d: %v", cut, len(raw), err)
		}
	}
}

// FuzzDriverRestore: a snapshot is remote input (state transfer ships it
// from another member): Restore of arbitrary bytes never panics, and
// whatever it accepts it writes back as a snapshot that restores.
func FuzzDriverRestore(f *testing.F) {
	d, _ := newPurse(f, 0, Config{VoteCache: 4})
	for i := uint64(1); i <= 6; i++ {
		e := ent(i, i, 0, 0, 1)
		if err := d.Apply([]Entry{e}); err != nil {
			f.Fatal(err)
		}
		if i < 6 {
			if err := d.AddVote(Vote{ID: e.ID, GTS: e.GTS, G: 1, Vote: []byte{byte(i)}}); err != nil {
				f.Fatal(err)
			}
		}
	}
	var buf bytes.Buffer
	if err := d.Snapshot(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, _ := newPurse(t, 0, Config{VoteCache: 4})
		if err := d.Restore(bytes.NewReader(data)); err != nil {
			return
		}
		var out bytes.Buffer
		if err := d.Snapshot(&out); err != nil {
			t.Fatalf("a restored driver's snapshot: %v", err)
		}
		d2, _ := newPurse(t, 0, Config{VoteCache: 4})
		if err := d2.Restore(bytes.NewReader(out.Bytes())); err != nil {
			t.Fatalf("its snapshot does not restore: %v", err)
		}
	})
}
