package phi

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func mustNew(t testing.TB, cfg Config) *Detector {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCassandraGolden reproduces Cassandra's own ArrivalWindow test: a
// window of 4, arrivals at 111, 222, 333, 444 and 555 ms (the first seeds
// the 2 s initial value, which the four 111 ms intervals then push out),
// raw phi 1.0 at 666 ms and 22.03 at 3000 ms, i.e. 0.434 and 9.566 scaled.
func TestCassandraGolden(t *testing.T) {
	cfg := Defaults()
	cfg.WindowSize = 4
	d := mustNew(t, cfg)
	var w Window
	for _, at := range []int64{111, 222, 333, 444, 555} {
		d.Report(&w, at*ms)
	}
	if got := w.Mean(); got != 111*time.Millisecond {
		t.Fatalf("mean = %v, want 111ms", got)
	}
	for _, tc := range []struct {
		at        int64
		want, raw float64
	}{
		{666, 0.434, 1.0},    // 111 ms of silence
		{3000, 9.566, 22.03}, // 2445 ms of silence
	} {
		got := d.Phi(&w, tc.at*ms)
		if math.Abs(got-tc.want) > 0.0005 {
			t.Errorf("phi(%d ms) = %.4f, want %.3f", tc.at, got, tc.want)
		}
		if raw := got / PhiFactor; math.Abs(raw-tc.raw) > 0.005 {
			t.Errorf("raw phi(%d ms) = %.4f, want %.2f", tc.at, raw, tc.raw)
		}
		t.Logf("phi after %d ms of silence = %.4f (raw %.4f)", tc.at-555, got, got/PhiFactor)
	}
	if d.Convict(&w, 666*ms) {
		t.Error("convicted at phi 0.434")
	}
	if !d.Convict(&w, 3000*ms) {
		t.Error("not convicted at phi 9.566 > 8")
	}
}

// TestCassandraGoldenFullWindow gets the same values with the default
// 1000-sample window once the initial 2 s sample has been pushed out.
func TestCassandraGoldenFullWindow(t *testing.T) {
	d := mustNew(t, Defaults())
	var w Window
	at := int64(0)
	for i := 0; i <= 1000; i++ {
		at += 111 * ms
		d.Report(&w, at)
	}
	if w.Len() != 1000 {
		t.Fatalf("window holds %d samples, want 1000", w.Len())
	}
	if got := d.Phi(&w, at+111*ms); math.Abs(got-0.434) > 0.0005 {
		t.Errorf("phi(111ms) = %.4f, want 0.434", got)
	}
	if got := d.Phi(&w, at+2445*ms); math.Abs(got-9.566) > 0.0005 {
		t.Errorf("phi(2445ms) = %.4f, want 9.566", got)
	}
}

func TestPhiTable(t *testing.T) {
	sec := int64(time.Second)
	tests := []struct {
		name     string
		cfg      func(*Config)
		arrivals []int64
		at       int64
		wantPhi  float64 // -1: do not check
		wantMean time.Duration
		convict  bool
	}{
		{name: "empty window", arrivals: nil, at: 100 * sec, wantPhi: 0, convict: false},
		{name: "single arrival uses initial 2s", arrivals: []int64{10 * sec}, at: 12 * sec,
			wantPhi: PhiFactor, wantMean: 2 * time.Second},
		{name: "single arrival convicts after 8 ln10 x 2s", arrivals: []int64{0}, at: 36900 * ms,
			wantPhi: -1, wantMean: 2 * time.Second, convict: true},
		{name: "single arrival not yet convicted at 36.8s", arrivals: []int64{0}, at: 36800 * ms,
			wantPhi: -1, convict: false, wantMean: 2 * time.Second},
		{name: "interval above max ignored", arrivals: []int64{0, 1 * sec, 10 * sec}, at: 11 * sec,
			wantMean: 1500 * time.Millisecond, wantPhi: PhiFactor / 1.5},
		{name: "interval equal to max kept", arrivals: []int64{0, 2 * sec}, at: 4 * sec,
			wantMean: 2 * time.Second, wantPhi: PhiFactor},
		{name: "clock stepped back: ignored, last moves", arrivals: []int64{10 * sec, 9 * sec}, at: 10 * sec,
			wantMean: 2 * time.Second, wantPhi: PhiFactor / 2},
		{name: "now before last arrival", arrivals: []int64{10 * sec}, at: 9 * sec, wantPhi: 0,
			wantMean: 2 * time.Second},
		{name: "threshold 12", cfg: func(c *Config) { c.Threshold = 12 }, arrivals: []int64{0, sec, 2 * sec},
			at: 2*sec + 30*sec, wantPhi: -1, wantMean: 1333333333, convict: false},
		{name: "threshold 5", cfg: func(c *Config) { c.Threshold = 5 }, arrivals: []int64{0, sec, 2 * sec},
			at: 2*sec + 18*sec, wantPhi: -1, wantMean: 1333333333, convict: true},
		{name: "window 2 forgets", cfg: func(c *Config) { c.WindowSize = 2 },
			arrivals: []int64{0, 100 * ms, 200 * ms, 1200 * ms}, at: 2200 * ms,
			wantMean: 550 * time.Millisecond, wantPhi: PhiFactor / 0.55},
		{name: "zero intervals: mean 0 is +Inf", cfg: func(c *Config) { c.WindowSize = 1 },
			arrivals: []int64{0, 0}, at: 1, wantPhi: math.Inf(1), convict: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Defaults()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			d := mustNew(t, cfg)
			var w Window
			for _, a := range tc.arrivals {
				d.Report(&w, a)
			}
			got := d.Phi(&w, tc.at)
			if tc.wantPhi >= 0 && !(got == tc.wantPhi || math.Abs(got-tc.wantPhi) < 1e-9) {
				t.Errorf("phi = %v, want %v", got, tc.wantPhi)
			}
			if tc.wantMean != 0 && w.Mean() != tc.wantMean {
				t.Errorf("mean = %v, want %v", w.Mean(), tc.wantMean)
			}
			if c := d.Convict(&w, tc.at); c != tc.convict {
				t.Errorf("convict = %v, want %v (phi %v)", c, tc.convict, got)
			}
		})
	}
}

func TestWindowResetRelease(t *testing.T) {
	d := mustNew(t, Defaults())
	var w Window
	d.Report(&w, 0)
	d.Report(&w, ms*500)
	w.Reset()
	if w.Len() != 0 || d.Phi(&w, ms*10000) != 0 {
		t.Fatalf("reset window not empty: len %d", w.Len())
	}
	d.Report(&w, ms*10000)
	if w.Mean() != 2*time.Second {
		t.Fatalf("after reset, first arrival should seed the initial value, mean %v", w.Mean())
	}
	w.Release()
	if w.Len() != 0 || w.ring != nil {
		t.Fatal("release kept memory")
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Threshold = 0 },
		func(c *Config) { c.Threshold = math.NaN() },
		func(c *Config) { c.Threshold = math.Inf(1) },
		func(c *Config) { c.WindowSize = 0 },
		func(c *Config) { c.WindowSize = 1<<20 + 1 },
		func(c *Config) { c.InitialInterval = 0 },
		func(c *Config) { c.InitialInterval = maxSample + 1 },
		func(c *Config) { c.MaxInterval = -1 },
		func(c *Config) { c.MaxInterval = 2 * time.Hour },
		func(c *Config) { c.MaxLocalPause = -1 },
		func(c *Config) { c.BacklogWindow = -1 },
	}
	for i, f := range bad {
		c := Defaults()
		f(&c)
		if _, err := New(c); err == nil {
			t.Errorf("case %d: config %+v accepted", i, c)
		}
	}
	if _, err := New(Defaults()); err != nil {
		t.Fatal(err)
	}
}

func TestGuards(t *testing.T) {
	sec := int64(time.Second)
	type step struct {
		at      int64
		backlog int
		lastMsg int64
		want    Verdict
	}
	tests := []struct {
		name  string
		cfg   func(*Config)
		steps []step
	}{
		{"regular 1s checks allowed", nil, []step{
			{0, 0, 0, Allow}, {sec, 0, 0, Allow}, {2 * sec, 0, 0, Allow}, {7 * sec, 0, 0, Allow}}},
		{"pause over 5s suppresses for 5s more", nil, []step{
			{0, 0, 0, Allow}, {sec, 0, 0, Allow},
			{7 * sec, 0, 0, LocalPause},  // 6 s gap
			{8 * sec, 0, 0, LocalPause},  // 1 s after the pause was seen
			{11 * sec, 0, 0, LocalPause}, // 4 s after
			{12 * sec, 0, 0, Allow},      // 5 s after
		}},
		{"gap of exactly 5s is not a pause", nil, []step{{0, 0, 0, Allow}, {5 * sec, 0, 0, Allow}}},
		{"first check is never a pause", nil, []step{{100 * sec, 0, 0, Allow}}},
		{"pause guard disabled", func(c *Config) { c.MaxLocalPause = 0 }, []step{
			{0, 0, 0, Allow}, {60 * sec, 0, 0, Allow}}},
		{"backlog with stale processing suppresses", nil, []step{
			{10 * sec, 3, 8 * sec, Backlog},
			{11 * sec, 3, 10*sec + 500*ms, Allow}, // processed recently
			{12 * sec, 0, 8 * sec, Allow},         // nothing queued
		}},
		{"backlog guard disabled", func(c *Config) { c.BacklogWindow = 0 }, []step{
			{10 * sec, 100, 0, Allow}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Defaults()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			d := mustNew(t, cfg)
			for i, s := range tc.steps {
				if got := d.Check(s.at, s.backlog, s.lastMsg); got != s.want {
					t.Errorf("step %d (t=%v): %v, want %v", i, time.Duration(s.at), got, s.want)
				}
			}
		})
	}
}

// naive is the straightforward model: keep every arrival, rebuild the
// interval list, apply the rules, average the last WindowSize, in float64
// nanoseconds.
type naive struct {
	cfg      Config
	arrivals []int64
}

func (n *naive) phi(now int64) float64 {
	if len(n.arrivals) == 0 {
		return 0
	}
	ivs := []float64{float64(n.cfg.InitialInterval)}
	for i := 1; i < len(n.arrivals); i++ {
		iv := n.arrivals[i] - n.arrivals[i-1]
		if iv >= 0 && iv <= int64(n.cfg.MaxInterval) {
			ivs = append(ivs, float64(iv))
		}
	}
	if len(ivs) > n.cfg.WindowSize {
		ivs = ivs[len(ivs)-n.cfg.WindowSize:]
	}
	sum := 0.0
	for _, v := range ivs {
		sum += v
	}
	last := n.arrivals[len(n.arrivals)-1]
	t := now - last
	if t <= 0 {
		return 0
	}
	if sum == 0 {
		return math.Inf(1)
	}
	return PhiFactor * float64(t) / (sum / float64(len(ivs)))
}

// TestNaiveTwin drives the Window and the naive model with the same random
// arrival sequences (microsecond-aligned, so the µs storage is exact) and
// compares phi at random probe times.
func TestNaiveTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		cfg := Defaults()
		cfg.WindowSize = 1 + r.IntN(40)
		cfg.InitialInterval = time.Duration(1+r.IntN(3000)) * time.Millisecond
		cfg.MaxInterval = time.Duration(1+r.IntN(3000)) * time.Millisecond
		d := mustNew(t, cfg)
		tw := &naive{cfg: cfg}
		var w Window
		now := int64(r.IntN(1 << 30))
		for i := 0; i < 200; i++ {
			switch k := r.IntN(10); {
			case k < 7:
				now += int64(r.IntN(1500_000)) * 1000 // up to 1.5 s, µs-aligned
			case k < 9:
				now += int64(r.IntN(5000_000)) * 1000 // sometimes above max
			default:
				now -= int64(r.IntN(100_000)) * 1000 // clock steps back
			}
			d.Report(&w, now)
			tw.arrivals = append(tw.arrivals, now)
			probe := now + int64(r.IntN(40_000))*int64(time.Millisecond)/10
			got, want := d.Phi(&w, probe), tw.phi(probe)
			if !(got == want || math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))) {
				t.Fatalf("trial %d step %d: phi %v, naive %v (cfg %+v)", trial, i, got, want, cfg)
			}
			if d.Convict(&w, probe) != (want > cfg.Threshold) {
				t.Fatalf("trial %d step %d: convict disagrees at phi %v", trial, i, want)
			}
		}
	}
}

func BenchmarkReportPhi(b *testing.B) {
	d := mustNew(b, Defaults())
	var w Window
	now := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		now += 1100 * ms
		d.Report(&w, now)
		_ = d.Phi(&w, now+500*ms)
	}
}
