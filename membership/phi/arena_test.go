package phi

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func mustArena(t testing.TB, cfg Config) *Arena {
	t.Helper()
	a, err := mustNew(t, cfg).NewArena()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestArenaGolden: Cassandra's ArrivalWindow test (see TestCassandraGolden)
// on an arena slot.
func TestArenaGolden(t *testing.T) {
	cfg := Defaults()
	cfg.WindowSize = 4
	a := mustArena(t, cfg)
	if a.Resolution() != 100*time.Microsecond {
		t.Fatalf("resolution %v, want 100µs for a 2 s maximum", a.Resolution())
	}
	a.Resize(3)
	for _, at := range []int64{111, 222, 333, 444, 555} {
		a.Report(1, at*ms)
	}
	if got := a.Mean(1); got != 111*time.Millisecond {
		t.Fatalf("mean = %v, want 111ms", got)
	}
	if a.Samples(0) != 0 || a.Samples(2) != 0 || a.Samples(1) != 4 {
		t.Fatalf("samples %d %d %d", a.Samples(0), a.Samples(1), a.Samples(2))
	}
	for _, tc := range []struct {
		at   int64
		want float64
	}{{666, 0.434}, {3000, 9.566}} {
		if got := a.Phi(1, tc.at*ms); math.Abs(got-tc.want) > 0.0005 {
			t.Errorf("phi(%d ms) = %.4f, want %.3f", tc.at, got, tc.want)
		}
	}
	if a.Convict(1, 666*ms) || !a.Convict(1, 3000*ms) {
		t.Error("conviction disagrees with phi")
	}
}

// TestArenaTwin drives Windows and arena slots with the same random
// arrivals (multiples of the arena's resolution, so storage is exact) and
// compares phi, means and verdicts; slots are moved, cleared and resized
// in between like a node's view.
func TestArenaTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		cfg := Defaults()
		cfg.WindowSize = 1 + r.IntN(40)
		cfg.InitialInterval = time.Duration(1+r.IntN(3000)) * time.Millisecond
		cfg.MaxInterval = time.Duration(1+r.IntN(3000)) * time.Millisecond
		d := mustNew(t, cfg)
		a := mustArena(t, cfg)
		res := int64(a.Resolution())
		const slots = 5
		ws := make([]Window, slots)
		a.Resize(slots)
		now := int64(r.IntN(1<<30)) * res
		for step := 0; step < 300; step++ {
			i := r.IntN(slots)
			switch k := r.IntN(20); {
			case k == 0: // move a slot over another
				j := r.IntN(slots)
				a.Move(i, j)
				ws[i] = Window{last: ws[j].last, sum: ws[j].sum, ring: append([]uint32(nil), ws[j].ring...), next: ws[j].next}
			case k == 1:
				a.Clear(i)
				ws[i].Release()
			case k < 12:
				now += int64(r.IntN(25_000)) * res
			case k < 14:
				now -= int64(r.IntN(1_000)) * res
			}
			d.Report(&ws[i], now)
			a.Report(i, now)
			probe := now + int64(r.IntN(400_000))*res
			for s := 0; s < slots; s++ {
				got, want := a.Phi(s, probe), d.Phi(&ws[s], probe)
				if !(got == want || math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))) {
					t.Fatalf("trial %d step %d slot %d: arena phi %v, window %v (cfg %+v)", trial, step, s, got, want, cfg)
				}
				if a.Mean(s) != ws[s].Mean() || a.Samples(s) != ws[s].Len() {
					t.Fatalf("trial %d step %d slot %d: mean %v/%v samples %d/%d", trial, step, s, a.Mean(s), ws[s].Mean(), a.Samples(s), ws[s].Len())
				}
				if a.Convict(s, probe) != d.Convict(&ws[s], probe) {
					t.Fatalf("trial %d step %d slot %d: convict disagrees at phi %v", trial, step, s, want)
				}
			}
		}
	}
}

// TestArenaQuantizes: intervals off the resolution are rounded to it.
func TestArenaQuantizes(t *testing.T) {
	a := mustArena(t, Defaults()) // 100 µs units
	a.Resize(1)
	a.Report(0, 0)
	a.Report(0, int64(1000*time.Millisecond+149*time.Microsecond))
	if got, want := a.Mean(0), (2*time.Second+1000100*time.Microsecond)/2; got != want {
		t.Fatalf("mean %v, want %v", got, want)
	}
	if a.Phi(0, -1) != 0 {
		t.Fatal("phi before the last arrival")
	}
	a.Resize(0)
	if a.Len() != 0 {
		t.Fatal("resize to 0")
	}
}

func TestArenaLimits(t *testing.T) {
	cfg := Defaults()
	cfg.WindowSize = MaxArenaWindow + 1
	if _, err := mustNew(t, cfg).NewArena(); err == nil {
		t.Fatal("oversized window accepted")
	}
	cfg.WindowSize = MaxArenaWindow
	cfg.InitialInterval = maxSample
	cfg.MaxInterval = maxSample
	a := mustArena(t, cfg)
	if a.Resolution()*math.MaxUint16 < maxSample {
		t.Fatalf("resolution %v cannot hold %v", a.Resolution(), maxSample)
	}
	a.Resize(1)
	for i := 0; i < 3*MaxArenaWindow; i++ {
		a.Report(0, int64(i)*int64(maxSample))
	}
	if a.Samples(0) != MaxArenaWindow || a.Mean(0) < maxSample-a.Resolution() {
		t.Fatalf("full window: %d samples, mean %v", a.Samples(0), a.Mean(0))
	}
}

func BenchmarkArenaReportConvict(b *testing.B) {
	cfg := Defaults()
	cfg.WindowSize = 8
	a := mustArena(b, cfg)
	a.Resize(1024)
	now := int64(0)
	for b.Loop() {
		now += 1100 * ms
		for i := 0; i < 1024; i++ {
			a.Report(i, now+int64(i))
		}
		for i := 0; i < 1024; i++ {
			_ = a.Convict(i, now+500*ms)
		}
	}
}
