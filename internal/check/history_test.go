package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestWriterShapes(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, Config{Protocol: "wbcast", Groups: 3, Replicas: 3, Seed: 42})
	evs := []Event{
		{Ev: EvMulticast, ID: "m1", Dest: []int{0, 2}, T: 5, Digest: 77},
		{Ev: EvDeliver, Proc: 4, Group: 1, ID: "m1", GTS: GTS{7, 2}, T: 9, Digest: 77},
		{Ev: EvCrash, Proc: 4, T: 11},
		{Ev: EvRestart, Proc: 4, T: 15},
		{Ev: EvMulticast, ID: "m2", Dest: []int{1}, T: -1},
	}
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `{"ev":"config","protocol":"wbcast","groups":3,"replicas":3,"seed":42}
{"ev":"multicast","id":"m1","dest":[0,2],"t":5}
{"ev":"deliver","proc":4,"group":1,"id":"m1","gts":[7,2],"t":9}
{"ev":"crash","proc":4,"t":11}
{"ev":"restart","proc":4,"t":15}
{"ev":"multicast","id":"m2","dest":[1],"t":-1}
`
	if got := buf.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if err := w.Write(Event{Ev: "bogus"}); err == nil {
		t.Fatal("unknown ev written")
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n -= len(p); f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestWriterStickyError(t *testing.T) {
	w := NewWriter(&failWriter{n: 10}, Config{Groups: 1, Replicas: 1})
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		err = w.Write(Event{Ev: EvCrash, Proc: 0, T: int64(i)})
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil || w.Flush() == nil || w.Write(Event{Ev: EvCrash}) == nil {
		t.Fatalf("write error not reported / not sticky: %v", err)
	}
}

func roundTrip(t *testing.T, h *History) *History {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, h); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("line %d is not valid JSON: %s", i+1, line)
		}
	}
	got, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func noDigests(h *History) *History {
	h = clone(h)
	for i := range h.Events {
		h.Events[i].Digest = 0
	}
	return h
}

func TestRoundTrip(t *testing.T) {
	hs := []*History{base()}
	for seed := uint64(0); seed < 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		hs = append(hs, gen(r, genOpts{M: 1 + r.IntN(40), G: 1 + r.IntN(4), R: 1 + r.IntN(4), gts: seed%2 == 0, digests: true, crashes: true}))
	}
	// Format-valid but semantically odd values survive too.
	odd := newBuilder(2, 2)
	odd.h.Config.Seed = 1<<64 - 1
	odd.h.Events = append(odd.h.Events,
		Event{Ev: EvMulticast, ID: "", Dest: []int{}, T: -5},
		Event{Ev: EvDeliver, Proc: -1, Group: -7, ID: "x", GTS: GTS{1<<64 - 1, -2}, T: -1 << 63},
		Event{Ev: EvCrash, Proc: 1 << 30, T: 1<<63 - 1})
	hs = append(hs, &odd.h)
	for i, h := range hs {
		h = noDigests(h)
		if got := roundTrip(t, h); !reflect.DeepEqual(got, h) {
			t.Fatalf("history %d: round trip differs:\ngot  %+v\nwant %+v", i, got, h)
		}
	}
}

func TestEscaping(t *testing.T) {
	ids := []string{
		`plain`, `q"uote`, `back\slash`, "nl\nret\rtab\t", "ctl\x00\x01\x1f\x7f",
		"\b\f", "é日本😀", "sep\u2028\u2029", "<&>", "bad\xffutf8\xc3", "/slash",
	}
	b := newBuilder(1, 1)
	for _, id := range ids {
		b.mc(id, 0)
		b.dl(0, id, GTS{})
	}
	got := roundTrip(t, &b.h)
	for i, id := range ids {
		// What encoding/json makes of the same string.
		enc, _ := json.Marshal(id)
		var want string
		if err := json.Unmarshal(enc, &want); err != nil {
			t.Fatal(err)
		}
		if g := got.Events[2*i].ID; g != want {
			t.Errorf("id %q read back as %q, want %q", id, g, want)
		}
		if g := got.Events[2*i+1].ID; g != want {
			t.Errorf("deliver id %q read back as %q, want %q", id, g, want)
		}
	}
}

func TestReadLenient(t *testing.T) {
	in := "\n  \r\n" + `{"ev":"config","protocol":"p","groups":1,"replicas":1,"seed":0}` + "\r\n\n" +
		` { "t" : 3 , "ev" : "crash" , "proc" : 0 } ` + "\n" +
		`{"ev":"multicast","id":"a\u0041\/","dest":[ 0 ],"t":4}` // no final newline
	h, err := ReadJSONL(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{Ev: EvCrash, Proc: 0, T: 3}, {Ev: EvMulticast, ID: "aA/", Dest: []int{0}, T: 4}}
	if !reflect.DeepEqual(h.Events, want) || h.Config != (Config{Protocol: "p", Groups: 1, Replicas: 1}) {
		t.Fatalf("got %+v", h)
	}
}

func TestReadLongLine(t *testing.T) {
	id := strings.Repeat("x", 300<<10)
	b := newBuilder(1, 1)
	b.mc(id, 0).dl(0, id, GTS{1, 0})
	if got := roundTrip(t, &b.h); !reflect.DeepEqual(got, &b.h) {
		t.Fatal("long line round trip differs")
	}
}

func TestReadErrors(t *testing.T) {
	const cfg = `{"ev":"config","protocol":"p","groups":2,"replicas":3,"seed":1}` + "\n"
	cases := []struct{ in, want string }{
		{"", "missing config"},
		{"\n\n", "missing config"},
		{`{"ev":"multicast","id":"a","dest":[0],"t":1}`, "line 1: first line must be the config"},
		{cfg + cfg, "line 2: config line must be first"},
		{cfg + `{"ev":"send","proc":1,"t":1}`, `line 2: unknown ev "send"`},
		{cfg + "\n" + `{"ev":"crash","proc":1,"t":}`, "line 3:"},
		{cfg + `{"ev":"crash","proc":1,"t":1`, "line 2:"},
		{cfg + `{"ev":"crash","proc":1,"t":1}}`, "line 2: col 30: trailing data"},
		{cfg + `{"ev":"crash","proc":1,"t":1} x`, "line 2:"},
		{cfg + `{"ev":"crash","proc":1,"t":1,"x":2}`, `line 2: col 30: unknown key "x"`},
		{cfg + `{"ev":"crash","proc":1,"proc":2,"t":1}`, `line 2: col 24: duplicate key "proc"`},
		{cfg + `{"ev":"crash","t":1}`, `line 2: crash event: missing key "proc"`},
		{cfg + `{"ev":"crash","proc":1,"t":1,"id":"a"}`, `line 2: crash event: unexpected key "id"`},
		{cfg + `{"proc":1,"t":1}`, `line 2: missing "ev"`},
		{cfg + `{}`, `line 2:`},
		{cfg + `[]`, `line 2:`},
		{cfg + `{"ev":"crash","proc":1,"t":1.5}`, "line 2: col 28: want integer, got non-integer"},
		{cfg + `{"ev":"crash","proc":1,"t":1e3}`, "line 2: col 28: want integer, got non-integer"},
		{cfg + `{"ev":"crash","proc":1,"t":"1"}`, "line 2: col 28: want integer"},
		{cfg + `{"ev":"crash","proc":01,"t":1}`, "line 2: col 22: leading zero"},
		{cfg + `{"ev":"crash","proc":null,"t":1}`, "line 2:"},
		{cfg + `{"ev":"crash","proc":1,"t":99999999999999999999}`, "line 2: col 28: integer out of range"},
		{cfg + `{"ev":"multicast","id":"a","dest":[0,],"t":1}`, "line 2:"},
		{cfg + `{"ev":"multicast","id":"a","dest":0,"t":1}`, "line 2:"},
		{cfg + "{\"ev\":\"multicast\",\"id\":\"a\x01\",\"dest\":[0],\"t\":1}", "line 2: col 26: control character"},
		{cfg + `{"ev":"multicast","id":"a\q","dest":[0],"t":1}`, "line 2:"},
		{cfg + `{"ev":"multicast","id":"abc,"dest":[0],"t":1}`, "line 2:"},
		{cfg + `{"ev":"multicast","id":7,"dest":[0],"t":1}`, "line 2:"},
		{cfg + `{"ev":"deliver","proc":1,"group":0,"id":"a","gts":[1],"t":1}`, "line 2:"},
		{cfg + `{"ev":"deliver","proc":1,"group":0,"id":"a","gts":[-1,0],"t":1}`, "line 2:"},
		{cfg + `{"ev":"deliver","proc":1,"group":0,"id":"a","gts":[1,0,0],"t":1}`, "line 2:"},
		{`{"ev":"config","protocol":"p","groups":0,"replicas":3,"seed":1}`, "line 1: config: invalid"},
		{`{"ev":"config","protocol":"p","groups":2,"replicas":3,"seed":-1}`, "line 1:"},
		{`{"ev":"config","protocol":"p","groups":2,"replicas":3}`, `line 1: config event: missing key "seed"`},
	}
	for _, c := range cases {
		_, err := ReadJSONL(strings.NewReader(c.in))
		if err == nil {
			t.Errorf("%q: no error", c.in)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %q, want it to contain %q", c.in, err, c.want)
		}
	}
}

func TestDigest(t *testing.T) {
	for _, s := range []string{"", "a", "hello, world", strings.Repeat("z", 1000)} {
		f := fnv.New64a()
		f.Write([]byte(s))
		if got, want := Digest([]byte(s)), f.Sum64(); got != want {
			t.Errorf("Digest(%q) = %x, want %x", s, got, want)
		}
	}
	if Digest(nil) == 0 {
		t.Fatal("zero digest")
	}
}

func TestConfigHelpers(t *testing.T) {
	c := Config{Groups: 3, Replicas: 5}
	if c.Procs() != 15 || c.Proc(2, 1) != 11 || c.GroupOf(11) != 2 || c.GroupOf(15) != -1 || c.GroupOf(-1) != -1 || c.Quorum() != 3 {
		t.Fatal("config helpers")
	}
	if (Config{Replicas: 4}).Quorum() != 3 || (Config{Replicas: 1}).Quorum() != 1 {
		t.Fatal("quorum")
	}
}

func benchHistory() *History {
	r := rand.New(rand.NewPCG(1, 2))
	return noDigests(gen(r, genOpts{M: 100000, G: 3, R: 3, full: true, all: true, gts: true}))
}

func BenchmarkWriteJSONL(b *testing.B) {
	h := benchHistory()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := WriteJSONL(&buf, h); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(buf.Len()))
}

func BenchmarkReadJSONL(b *testing.B) {
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, benchHistory()); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ReadJSONL(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
